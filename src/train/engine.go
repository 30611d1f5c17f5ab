package train

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"time"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/shard"
	"sancus/src/staleness"
)

type clock struct{ comm, wait time.Duration }

// Engine trains one rank's part of a GCN. It talks to other ranks only
// through its Comm, and only in aggregate (sancus.go), the gradient
// allreduce and the once-per-epoch agreement on metrics (run.go).
type Engine struct {
	plan    Plan // every choice, resolved once
	c       collectives.Comm
	s       *shard.Shard
	P, rank int

	m      *model.GCN
	opt    *model.Adam
	be     kernels.Backend // where the matrices live and are computed
	input  kernels.Input   // (ÂX)_i when precomputed, else X_i
	meanX  kernels.Input   // GraphSAGE's (D⁻¹AX)_i when precomputed
	layers []layer
	view   view // what this rank multiplies with each root's block
	part   part
	net    struct {
		x      exchanger             // how blocks travel (chosen once, in setup)
		blocks collectives.BlockComm // the device communicator, when one is used
	}
	drift drift    // variation-gap's row sample (drift.go)
	out   outRows  // the restricted last layer (output.go)
	ar    struct { // the weight-gradient allreduce
		grads    []float32 // flat gradient buffer, one allreduce per step
		residual []float32 // bf16: the error fed back
	}
	skips struct { // --residual
		out  []*matrix.Dense // layer l's output act(Z_l) + H_l (nil: no skip)
		grad *matrix.Dense   // the gradient a skip carries down
	}
	batch      *batchState // cluster-batch training (nil: global-batch)
	bestParams [][]float32 // after the best validation epoch (BestParams)
	tally      tally

	packed *packedScratch // --cache-bits: the one buffer packed blocks are decoded into (exchange.go)
}

// drift is where variation-gap measures drift: on a sample of rows, with
// the input operand and Â's blocks at them.
type drift struct {
	on     bool // the policy measures drift: keep noise-free shadows
	rows   []int32
	in     kernels.Input
	blocks map[*matrix.CSR]*matrix.CSR // Â's blocks at the sample rows, by block
}

// outRows is the last layer restricted to the rows the loss reads.
type outRows struct {
	rows     []int32        // those rows, ascending
	rowOps   kernels.RowOps // the operations at them (nil: every row)
	lossGrad *matrix.Dense  // ∂loss/∂logits, where the backend computes, made at first use (lossGradBuf): the restricted last layer's loss writes it over the logits
	all      bool           // a pass that computes every row wrote the logits: the loss at rows zeroes the others (run.go, step.go)
}

// tally is what the run counts for its report.
type tally struct {
	clock      clock          // this epoch's time inside and waiting on communication
	clipped    int            // gradient blocks clipped
	timed      *kernels.Timed // with --profile-kernels: e.be, timing each call
	inputBytes int64          // ÂX as the engine holds it: its operand when layer 1 reads it, else the shard's
	estimate   MemoryEstimate // what fitsMemory estimated before the layers were built
	stored     int64          // the shard as read, before openInput let go of what layer 1 does not read
}

// view is what this rank multiplies with root j's cached block: Â_ij with
// its columns numbered as the rows of j held here, how many rows those are,
// and their original node ids, which key dropout masks (nil: contiguous
// from Offsets[j]).
type view struct {
	blocks []*matrix.CSR
	rows   []int
	ids    [][]int64
}

// part is what this rank knows of its part of the graph beyond its shard.
type part struct {
	depends [][]bool      // depends[i][j]: nnz(Â_ij) > 0, known on every rank
	ownIDs  []int64       // original node id per local row (nil: contiguous numbering)
	blockT  []*matrix.CSR // every peer's block of the view transposed, for a reduction (reduce.go)
	attIDs  [][]int64     // the view's ids as the attention reads them (gat.go, attentionIDs)
	sage    struct {      // GraphSAGE: M = D⁻¹A and A blocks, this rank's 1/deg
		mean, adj []*matrix.CSR
		invDeg    []float32
	}
}

// Plan is what the engine runs: its Config resolved.
func (e *Engine) Plan() Plan { return e.plan }

// rows is how many rows this rank holds.
func (e *Engine) rows() int { return e.s.Rows() }

// New resolves cfg for the ranks of c (Resolve: every rank calls it) and
// sets up rank c.Rank()'s engine on its shard.
func New(cfg Config, c collectives.Comm, s *shard.Shard) (*Engine, error) {
	plan, err := Resolve(cfg, c)
	if err != nil {
		return nil, err
	}
	return NewPlanned(plan, c, s)
}

// NewPlanned sets up rank c.Rank()'s engine on its shard, for a plan its
// caller resolved (to report the link's choice before training).
func NewPlanned(plan Plan, c collectives.Comm, s *shard.Shard) (*Engine, error) {
	if plan.P != c.Size() {
		return nil, fmt.Errorf("a plan for %d ranks was given to rank %d of %d", plan.P, c.Rank(), c.Size())
	}
	if s.Parts != c.Size() || s.Rank != c.Rank() {
		return nil, fmt.Errorf("rank %d of %d was given shard %d of %d", c.Rank(), c.Size(), s.Rank, s.Parts)
	}
	if s.Classes < 1 {
		return nil, fmt.Errorf("dataset has no labelled classes")
	}
	if s.GlobalTrain == 0 { // the loss would be 0/0 from the first epoch
		return nil, fmt.Errorf("dataset has no training nodes among its %d: its split (train.txt, or the default 10%% of the labelled nodes) leaves none", s.N)
	}
	if err := sameShardSet(c, s); err != nil {
		return nil, err
	}
	e := &Engine{plan: plan, c: c, s: s, P: c.Size(), rank: c.Rank()}
	e.drift.on = plan.policy.NeedsDrift()
	local := plan.Run.LocalRank
	if local < 0 {
		local = e.rank
	}
	var err error
	if e.be = plan.Run.Backend; e.be == nil {
		if e.be, err = kernels.Open(plan.Run.Device, local); err != nil {
			return nil, fmt.Errorf("rank %d: %w", e.rank, err)
		}
	}
	if plan.Run.ProfileKernels {
		e.tally.timed = kernels.NewTimed(e.be)
		e.be = e.tally.timed
	}
	if err := e.setup(); err != nil {
		e.Close() // device memory and communicators taken so far
		return nil, err
	}
	return e, nil
}

// sameShardSet checks, before anything else travels, that every rank's
// shard comes from one preparation: a shard of another prepare (another
// partition, other flags) would train on mismatched rows, or hang.
func sameShardSet(c collectives.Comm, s *shard.Shard) error {
	sets := make([]uint64, c.Size())
	if err := collectives.AllgatherFlags(c, s.Set, sets); err != nil {
		return fmt.Errorf("comparing shard sets: %w", err)
	}
	for r, set := range sets {
		if set != sets[0] {
			return fmt.Errorf("rank %d's shard and rank 0's come from different preparations (shard sets %016x and %016x): the shard directory mixes files of two `sancus prepare` runs; prepare it again", r, set, sets[0])
		}
	}
	return nil
}

// setup builds the model, chooses the exchange and builds the layers on the
// opened backend.
func (e *Engine) setup() error {
	e.tally.stored = storedBytes(e.s)
	if err := e.openInput(); err != nil {
		return err
	}
	dims, heads := e.plan.Model.widths(e.s.FeatDim, e.s.Classes)
	// Every rank learns of a rank that would not fit, before the first
	// collective, which the others would otherwise wait on.
	failed, comm := e.agree(e.fitsMemory(dims))
	if comm != nil {
		return comm
	}
	if failed != nil {
		return failed
	}
	var err error
	if e.m, err = model.New(e.plan.Model.Arch, dims, heads, e.plan.Optim.Seed); err != nil {
		return err
	}
	e.opt = model.NewAdam(e.plan.Optim.LR, e.m.NumParams())
	e.ar.grads = make([]float32, e.m.NumParams())
	if err := e.shareSparsity(); err != nil {
		return err
	}
	if e.s.NodeIDs != nil {
		e.part.ownIDs = make([]int64, e.rows())
		for r := range e.part.ownIDs {
			e.part.ownIDs[r] = int64(e.s.NodeIDs[r])
		}
	}
	if err := e.chooseExchange(); err != nil {
		return err
	}
	gradPolicy := staleness.Policy(staleness.None{})
	if e.plan.Staleness.SkipGradients {
		gradPolicy = e.plan.policy
	}
	e.skips.out = make([]*matrix.Dense, e.plan.Model.Layers)
	for l := range e.plan.Model.Layers {
		e.layers = append(e.layers, e.newLayer(l, dims[l], dims[l+1], gradPolicy))
		if e.hasResidual(l) {
			e.skips.out[l] = e.be.NewDense(e.rows(), dims[l+1])
			if e.skips.grad == nil {
				e.skips.grad = e.be.NewDense(e.rows(), dims[l+1])
			}
		}
	}
	if err := e.restrictOutput(); err != nil {
		return err
	}
	e.routeCaches()
	e.lendEvalSlots()
	e.mergeCaches()
	// What set-up let go (ÂX's CSR, uncompacted blocks, index lists) goes
	// back to the OS now: the collector would keep the pages, and the
	// training buffers first touched after this would add to them.
	debug.FreeOSMemory()
	return nil
}

// openInput makes layer 1's operands usable on the backend: X, or a GCN's
// ÂX in its place; GraphSAGE on D⁻¹AX reads both that and X (its root).
func (e *Engine) openInput() error {
	agg := e.precomputed()
	var prod *kernels.Operand // the product, when layer 1 reads one
	if agg != 0 {
		switch a := e.s.Of(agg); {
		case a.Dense != nil:
			prod = kernels.NewDenseOperand(a.Dense)
		case a.CSR != nil:
			prod = kernels.NewOperand(a.CSR)
		default:
			return fmt.Errorf("shard %d has no precomputed %v: prepare it with --precompute or train with --precompute=false", e.s.Rank, agg)
		}
	}
	op := prod // X is not read beside ÂX (nor expanded, where dense)
	if agg != shard.Sym {
		op = kernels.NewOperand(e.s.Features)
	}
	var err error
	if e.input, err = e.be.Input(op); err != nil {
		return fmt.Errorf("rank %d: input on %s: %w", e.rank, e.be.Name(), err)
	}
	if agg == shard.Mean {
		if e.meanX, err = e.be.Input(prod); err != nil {
			return fmt.Errorf("rank %d: %v on %s: %w", e.rank, agg, e.be.Name(), err)
		}
	}
	if e.drift.on {
		e.drift.rows = driftSampleRows(e.rows())
		if e.drift.in, err = e.be.Input(op.SelectRows(e.drift.rows)); err != nil {
			return fmt.Errorf("rank %d: drift sample on %s: %w", e.rank, e.be.Name(), err)
		}
	}
	// Layer 1's operands are all of X and its products that is read from
	// now on: the engine lets the rest go (the caller's shard keeps it, if
	// the caller keeps the shard). Layer 1 on ÂX reads neither X nor ÂX's
	// CSR once expanded to dense (half the bytes of the CSR at this
	// density); on X it reads no product. Cluster batches, which slice X,
	// read X alone.
	sh := *e.s
	sh.AX, sh.MX = shard.Aggregate{}, shard.Aggregate{}
	if prod != nil {
		e.tally.inputBytes = prod.Bytes()
		if prod.IsSparse() {
			*sh.Of(agg) = *e.s.Of(agg)
		}
	}
	if agg == shard.Sym {
		sh.Features = nil
	}
	e.s = &sh
	return nil
}

// chooseExchange picks, once, how blocks travel: through a device
// communicator (--device-comm), the sparsity-aware point-to-point exchange
// (the default with more than one rank), or dense ring broadcasts.
func (e *Engine) chooseExchange() error {
	var err error
	switch {
	case e.plan.Exchange.DeviceComm != collectives.DeviceCommRank:
		if !e.plan.Exchange.Dense && e.P > 1 {
			return fmt.Errorf("--device-comm %s moves whole blocks: add --dense-bcast", e.plan.Exchange.DeviceComm)
		}
		if e.plan.Wire.Fwd.Quantized() || e.plan.Wire.Grad.Quantized() {
			return fmt.Errorf("--device-comm %s moves float32 blocks: the quantized wire goes through the rank transport", e.plan.Exchange.DeviceComm)
		}
		if e.net.blocks, err = collectives.OpenBlockComm(e.plan.Exchange.DeviceComm, e.c, e.be); err != nil {
			return fmt.Errorf("rank %d: %w", e.rank, err)
		}
		e.net.x = &blockExchange{comm: e.c, bc: e.net.blocks}
		e.view, err = e.denseView()
	case !e.plan.Exchange.Dense && e.P > 1:
		var sendIdx [][]int32
		e.view, sendIdx, err = e.sparseView()
		x := &sparseExchange{comm: e.c, be: e.be, sendIdx: sendIdx, packed: map[int][][]byte{}, chunk: cmp.Or(e.plan.Exchange.SparseChunk, defaultExchangeChunk)}
		e.net.x = x
		if err == nil && e.plan.Batch.Mode.Clusters() {
			err = e.setupBatches(sendIdx)
			x.batch = e.batch
		}
		return err
	default:
		bcast := collectives.Ring(e.plan.Exchange.RingChunk * 4) // --chunk counts floats
		if e.plan.Exchange.Native {
			bcast = collectives.Native
		}
		e.net.x = &ringExchange{comm: e.c, be: e.be, bcast: bcast}
		e.view, err = e.denseView()
	}
	if err == nil && e.plan.Batch.Mode.Clusters() {
		err = e.setupBatches(nil)
	}
	return err
}

// denseView multiplies whole blocks. On a reordered graph every rank needs
// every rank's node ids to mask the blocks it receives (one allgather).
func (e *Engine) denseView() (view, error) {
	v := view{blocks: e.s.Blocks, rows: make([]int, e.P), ids: make([][]int64, e.P)}
	for j := range v.rows {
		v.rows[j] = e.s.RowsOf(j)
	}
	v.ids[e.rank] = e.part.ownIDs
	if e.part.ownIDs == nil || e.P == 1 {
		return v, nil
	}
	all := make([]int64, e.s.N)
	if err := collectives.Allgatherv(e.c, e.part.ownIDs, all, v.rows); err != nil {
		return v, fmt.Errorf("gathering node ids: %w", err)
	}
	for j := range v.ids {
		v.ids[j] = all[e.s.Offsets[j]:e.s.Offsets[j+1]]
	}
	return v, nil
}

// Close releases the device communicator and the backend's device memory.
func (e *Engine) Close() error {
	if e.net.blocks != nil {
		if err := e.net.blocks.Close(); err != nil {
			e.be.Close()
			return err
		}
	}
	return e.be.Close()
}

// shareSparsity tells every rank which blocks Â_ij are non-empty (one
// allgather at start-up); epoch-adaptive staleness uses it.
func (e *Engine) shareSparsity() error {
	mine := make([]byte, e.P)
	for j, b := range e.s.Blocks {
		if b.NNZ() > 0 {
			mine[j] = 1
		}
	}
	all, err := collectives.Allgather(e.c, mine)
	if err != nil {
		return fmt.Errorf("sharing block sparsity: %w", err)
	}
	e.part.depends = make([][]bool, e.P)
	for i := range e.part.depends {
		e.part.depends[i] = make([]bool, e.P)
		for j := range e.part.depends[i] {
			e.part.depends[i][j] = all[i*e.P+j] != 0
		}
	}
	return nil
}

// precomputed is the product with X that layer 1 reads from the shard.
func (e *Engine) precomputed() shard.Aggregation { return e.plan.Precomputed() }

// srcID is the original node id of root j's row r as this rank holds it.
func (e *Engine) srcID(j, r int) int64 {
	if ids := e.view.ids[j]; ids != nil {
		return ids[r]
	}
	return e.s.Offsets[j] + int64(r)
}

// ownID is the node id of local row r (original numbering, which dropout
// masks use, so a reordered run draws the masks of the original one).
func (e *Engine) ownID(r int) int64 {
	if e.part.ownIDs != nil {
		return e.part.ownIDs[r]
	}
	return e.s.Offsets[e.rank] + int64(r)
}

// mask is the dropout mask of layer l's input in a training epoch.
func (e *Engine) mask(epoch, l int, train bool) matrix.Mask {
	if !train {
		return matrix.Mask{}
	}
	return matrix.Mask{P: float32(e.plan.Model.Dropout), Seed: e.plan.Optim.Seed, Stream: uint64(epoch)<<8 | uint64(l), Row0: e.s.Row0(), IDs: e.part.ownIDs}
}

// maskFor is a layer's dropout applied to root j's rows as cache c holds
// them: the view's rows, or, in a slot that holds only some (hold), those.
func (e *Engine) maskFor(m matrix.Mask, c *cache, j int) matrix.Mask {
	m.IDs, m.Row0 = c.heldIDs(j, e.view.ids[j]), int(e.s.Offsets[j])
	return m
}

// host returns d's values on the host (downloading them from a device).
func (e *Engine) host(d *matrix.Dense) []float32 {
	e.be.Download(d)
	return d.Data
}

// Params returns the model's parameter tensors (W0, b0, W1, b1, …).
func (e *Engine) Params() [][]float32 { return e.m.Flat() }

// BestParams are the parameters after the best validation epoch this run
// evaluated (nil: none, as after a resume that evaluated no better one):
// the weights whose test accuracy the report gives.
func (e *Engine) BestParams() [][]float32 { return e.bestParams }

// keepBest copies the parameters as the best so far: a few MB at most,
// against reading them back from a checkpoint that may not be there.
func (e *Engine) keepBest() {
	flat := e.m.Flat()
	if e.bestParams == nil {
		e.bestParams = make([][]float32, len(flat))
		for i, p := range flat {
			e.bestParams[i] = make([]float32, len(p))
		}
	}
	for i, p := range flat {
		copy(e.bestParams[i], p)
	}
}

package train

import (
	"fmt"
	"math"
	"time"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/shard"
	"sancus/src/staleness"
)

// How a layer combines aggregation (Â·) and transformation (·W).
type layerMode int

const (
	modeLocal     layerMode = iota // layer 1 on precomputed ÂX: no communication at all
	modeAggFirst                   // T = Σ Â_ij H_j, Z = T W  (send H: the input is narrower)
	modeTransform                  // U = H W, Z = Σ Â_ij U_j   (send HW: the output is narrower)
)

func (m layerMode) String() string {
	return [...]string{"local (precomputed ÂX)", "aggregate-first (send H)", "transform-first (send HW)"}[m]
}

type layer struct {
	mode       layerMode
	din, dout  int
	in         *matrix.Dense // dropout(H_{l-1}), transform-first l > 0
	t          *matrix.Dense // Σ Â_ij H_j (aggregate-first)
	u          *matrix.Dense // H W (transform-first)
	z          *matrix.Dense // output; H_l after ReLU
	fwd        *exchange     // forward blocks and their cache
	grad       *exchange     // backward gradient blocks
	eval       *exchange     // eval-mode blocks: always fresh, never cached
	dT, dIn    *matrix.Dense
	dU         *matrix.Dense
	dW         *matrix.Dense
	raw        *matrix.Dense // H̄·W without dropout (variation-gap reference)
	clean      *matrix.Dense // noise-free shadow of the output (variation-gap only)
	cleanStore *matrix.Dense
	tClean     *matrix.Dense
	db         []float32
}

type clock struct{ comm, wait time.Duration }

// Engine trains one rank's part of a GCN.
type Engine struct {
	cfg     Config
	c       collectives.Comm
	s       *shard.Shard
	P, rank int
	rows    int

	m      *model.GCN
	opt    *model.Adam
	be     kernels.Backend // where the matrices live and are computed
	input  kernels.Input   // (ÂX)_i when precomputed, else X_i
	layers []*layer

	depends   [][]bool // depends[i][j]: nnz(Â_ij) > 0, known on every rank
	bcast     collectives.BcastFunc
	clipScale float64
	clipped   int
	clock     clock
	grads     []float32             // flat gradient buffer, one allreduce per step
	lossGrad  *matrix.Dense         // ∂loss/∂logits, where the backend computes
	drift     bool                  // the forward policy measures variation gaps
	sparse    *sparsePlan           // nil: dense broadcasts of whole blocks
	blocks    collectives.BlockComm // set: dense blocks move through it (NCCL)
	ownIDs    []int64               // original node id per local row (nil: contiguous numbering)
	allIDs    []int64               // dense mode on a reordered graph: every rank's node ids
}

// New sets up rank c.Rank()'s engine on its shard.
func New(cfg Config, c collectives.Comm, s *shard.Shard) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s.Parts != c.Size() || s.Rank != c.Rank() {
		return nil, fmt.Errorf("rank %d of %d was given shard %d of %d", c.Rank(), c.Size(), s.Rank, s.Parts)
	}
	if s.Classes < 1 {
		return nil, fmt.Errorf("dataset has no labelled classes")
	}
	e := &Engine{cfg: cfg, c: c, s: s, P: c.Size(), rank: c.Rank(), rows: s.Rows()}
	e.clipScale = cfg.ClipScale
	if e.clipScale == 0 {
		e.clipScale = math.Sqrt(float64(e.P))
	}
	e.bcast = collectives.Ring(cfg.Chunk)
	if cfg.NativeBcast {
		e.bcast = collectives.Native
	}
	local := cfg.LocalRank
	if local < 0 {
		local = e.rank
	}
	var err error
	if e.be, err = kernels.Open(cfg.Device, local); err != nil {
		return nil, fmt.Errorf("rank %d: %w", e.rank, err)
	}
	if err := e.setup(); err != nil {
		e.Close() // device memory and communicators taken so far
		return nil, err
	}
	return e, nil
}

// setup builds the model, the layer buffers and the exchanges on the
// opened backend.
func (e *Engine) setup() error {
	cfg, c, s := e.cfg, e.c, e.s
	var err error
	var in *kernels.Operand
	if cfg.Precompute {
		if s.AX == nil {
			return fmt.Errorf("shard %d has no precomputed ÂX: prepare it with --precompute or train with --precompute=false", s.Rank)
		}
		in = kernels.NewOperand(s.AX)
	} else {
		in = kernels.NewOperand(s.Features)
	}
	if e.input, err = e.be.Input(in); err != nil {
		return fmt.Errorf("rank %d: input on %s: %w", e.rank, e.be.Name(), err)
	}
	dims := []int{s.FeatDim}
	for l := 0; l+1 < cfg.Layers; l++ {
		dims = append(dims, cfg.Hidden)
	}
	dims = append(dims, s.Classes)
	if e.m, err = model.NewGCN(dims, cfg.Seed); err != nil {
		return err
	}
	e.opt = model.NewAdam(cfg.LR, e.m.NumParams())
	e.grads = make([]float32, e.m.NumParams())
	e.lossGrad = e.be.NewDense(e.rows, s.Classes)
	if err := e.shareSparsity(); err != nil {
		return err
	}
	if s.NodeIDs != nil {
		e.ownIDs = make([]int64, e.rows)
		for r := range e.ownIDs {
			e.ownIDs[r] = int64(s.NodeIDs[r])
		}
	}
	if !cfg.DenseBcast && e.P > 1 {
		if e.sparse, err = e.newSparsePlan(); err != nil {
			return err
		}
	} else if s.NodeIDs != nil && e.P > 1 {
		if err := e.gatherIDs(); err != nil {
			return err
		}
	}
	if cfg.DeviceComm != "" {
		if e.sparse != nil {
			return fmt.Errorf("--device-comm %s moves whole blocks: add --dense-bcast", cfg.DeviceComm)
		}
		if e.blocks, err = collectives.OpenBlockComm(cfg.DeviceComm, c, e.be); err != nil {
			return fmt.Errorf("rank %d: %w", e.rank, err)
		}
	}
	policy, _ := staleness.Parse(cfg.Staleness, cfg.Eps, cfg.MaxStale)
	e.drift = staleness.UsesDrift(policy)
	gradPolicy := staleness.Policy(staleness.None{})
	if cfg.SkipGradients {
		gradPolicy = policy
	}
	for l := 0; l < cfg.Layers; l++ {
		L := &layer{din: dims[l], dout: dims[l+1]}
		switch {
		case l == 0 && cfg.Precompute:
			L.mode = modeLocal
		case l == 0 || L.din > L.dout:
			L.mode = modeTransform // the raw input is never broadcast: XW is narrower
		default:
			L.mode = modeAggFirst
		}
		r := e.rows
		L.z = e.be.NewDense(r, L.dout)
		L.dW = e.be.NewDense(L.din, L.dout)
		L.db = make([]float32, L.dout)
		name := fmt.Sprintf("layer %d", l+1)
		width := 0 // of the blocks this layer sends (0: none)
		switch L.mode {
		case modeAggFirst:
			L.t = e.be.NewDense(r, L.din)
			L.dT = e.be.NewDense(r, L.din)
			L.dIn = e.be.NewDense(r, L.din)
			width = L.din
		case modeTransform:
			if l > 0 {
				L.in = e.be.NewDense(r, L.din)
				L.dIn = e.be.NewDense(r, L.din)
			}
			L.u = e.be.NewDense(r, L.dout)
			L.dU = e.be.NewDense(r, L.dout)
			width = L.dout
		}
		if width > 0 {
			L.fwd = e.newExchange(name+" forward", width, policy)
			L.eval = e.newExchange(name+" eval", width, staleness.None{})
			L.grad = e.newExchange(name+" gradient", width, gradPolicy)
		}
		e.layers = append(e.layers, L)
	}
	return nil
}

// Close releases the backend's device memory.
func (e *Engine) Close() error {
	if e.blocks != nil {
		if err := e.blocks.Close(); err != nil {
			e.be.Close()
			return err
		}
	}
	return e.be.Close()
}

// shareSparsity tells every rank which blocks Â_ij are non-empty (one
// allgather at start-up); epoch-adaptive staleness uses it.
func (e *Engine) shareSparsity() error {
	mine := make([]float32, e.P)
	for j, b := range e.s.Blocks {
		if b.NNZ() > 0 {
			mine[j] = 1
		}
	}
	all := make([]float32, e.P*e.P)
	counts := make([]int, e.P)
	for i := range counts {
		counts[i] = e.P
	}
	if e.P == 1 {
		copy(all, mine)
	} else if err := e.c.Allgatherv(mine, all, counts); err != nil {
		return fmt.Errorf("sharing block sparsity: %w", err)
	}
	e.depends = make([][]bool, e.P)
	for i := range e.depends {
		e.depends[i] = make([]bool, e.P)
		for j := range e.depends[i] {
			e.depends[i][j] = all[i*e.P+j] != 0
		}
	}
	return nil
}

// mask is the dropout mask of layer l's input in a training epoch.
func (e *Engine) mask(epoch, l int, train bool) matrix.Mask {
	if !train {
		return matrix.Mask{}
	}
	return matrix.Mask{P: float32(e.cfg.Dropout), Seed: e.cfg.Seed, Stream: uint64(epoch)<<8 | uint64(l), Row0: e.s.Row0(), IDs: e.ownIDs}
}

// forward runs all layers and returns the logits of this rank's rows. In
// training the staleness policy may skip broadcasts; evaluation always uses
// fresh blocks and leaves the caches alone.
func (e *Engine) forward(epoch int, train bool) (*matrix.Dense, error) {
	var h *matrix.Dense  // H_{l-1} as trained (upstream dropout included)
	var hc *matrix.Dense // the same without any dropout, for variation-gap
	for l, L := range e.layers {
		w := e.m.W[l]
		mask := e.mask(epoch, l, train)
		x := L.fwd
		if !train {
			x = L.eval
		}
		shadow := train && e.drift
		var err error
		switch L.mode {
		case modeLocal:
			e.input.SetDropout(mask)
			err = e.input.Mul(L.z, w)
			if err == nil && shadow {
				err = e.cleanLocal(l, mask)
			}
		case modeTransform:
			if l == 0 {
				e.input.SetDropout(mask)
				err = e.input.Mul(L.u, w)
			} else {
				e.be.Dropout(mask, L.in, h)
				err = e.be.GEMM(L.u, L.in, w, false)
			}
			if err != nil {
				break
			}
			var active []bool
			var ref *matrix.Dense
			if active, err = e.decide(x, epoch, func() float64 {
				ref = e.cleanTransform(l, hc, mask)
				return relDrift(e.host(ref), x.ref)
			}); err != nil {
				break
			}
			if active[e.rank] && shadow {
				if ref == nil {
					ref = e.cleanTransform(l, hc, mask)
				}
				x.ref = append(x.ref[:0], e.host(ref)...)
			}
			err = e.aggregate(x, L.z, L.u, active, matrix.Mask{})
			L.clean = nil // U carries the owner's dropout: no noise-free output without more traffic
		case modeAggFirst:
			// Raw H travels and is cached; every receiver applies the
			// owner's dropout mask (masks are positional).
			var active []bool
			if active, err = e.decide(x, epoch, func() float64 { return relDrift(e.host(orRaw(hc, h)), x.ref) }); err != nil {
				break
			}
			if active[e.rank] && shadow {
				x.ref = append(x.ref[:0], e.host(orRaw(hc, h))...)
			}
			if err = e.aggregate(x, L.t, h, active, mask); err == nil {
				err = e.be.GEMM(L.z, L.t, w, false)
			}
			if err == nil && shadow {
				err = e.cleanAggregate(l, x)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("forward layer %d: %w", l+1, err)
		}
		e.be.AddBiasReLU(L.z, e.m.B[l], l < len(e.layers)-1)
		h, hc = L.z, nil
		if shadow && L.clean != nil {
			e.be.AddBiasReLU(L.clean, e.m.B[l], l < len(e.layers)-1)
			hc = L.clean
		}
	}
	if err := e.be.Err(); err != nil {
		return nil, fmt.Errorf("forward on %s: %w", e.be.Name(), err)
	}
	return h, nil
}

// host returns d's values on the host (downloading them from a device).
func (e *Engine) host(d *matrix.Dense) []float32 {
	e.be.Download(d)
	return d.Data
}

// The variation gap must see how an embedding moves with the weights, not
// the dropout noise: with dropout 0.5 upstream, consecutive training copies
// of H differ by ~40% even when nothing is learned. So while variation-gap
// runs, each layer also keeps a noise-free shadow of its own rows, computed
// locally from the same inputs with every mask off. It costs compute, never
// traffic.

func orRaw(clean, raw *matrix.Dense) *matrix.Dense {
	if clean != nil {
		return clean
	}
	return raw
}

func (e *Engine) cleanBuf(L *layer, cols int) *matrix.Dense {
	if L.clean == nil || L.clean.Cols != cols {
		if L.cleanStore == nil || L.cleanStore.Cols != cols {
			L.cleanStore = e.be.NewDense(e.rows, cols)
		}
		L.clean = L.cleanStore
	}
	return L.clean
}

// cleanLocal: layer 1 on ÂX without dropout. mask is the training mask,
// put back for the backward pass.
func (e *Engine) cleanLocal(l int, mask matrix.Mask) error {
	L := e.layers[l]
	out := e.cleanBuf(L, L.dout)
	e.input.SetDropout(matrix.Mask{})
	err := e.input.Mul(out, e.m.W[l])
	e.input.SetDropout(mask)
	return err
}

// cleanTransform is H̄·W for this rank's rows: the reference a
// transform-first layer's drift is measured on.
func (e *Engine) cleanTransform(l int, hc *matrix.Dense, mask matrix.Mask) *matrix.Dense {
	L := e.layers[l]
	if L.raw == nil {
		L.raw = e.be.NewDense(e.rows, L.dout)
	}
	if l == 0 {
		e.input.SetDropout(matrix.Mask{})
		e.input.Mul(L.raw, e.m.W[0])
		e.input.SetDropout(mask)
	} else {
		e.be.GEMM(L.raw, hc, e.m.W[l], false)
	}
	return L.raw
}

// cleanAggregate recomputes an aggregate-first layer's rows from the blocks
// it just used (fresh or cached), without the dropout mask.
func (e *Engine) cleanAggregate(l int, x *exchange) error {
	L := e.layers[l]
	if L.tClean == nil {
		L.tClean = e.be.NewDense(e.rows, L.din)
	}
	first := true
	for j := 0; j < e.P; j++ {
		blk := e.block(j)
		if blk.NNZ() == 0 {
			continue
		}
		if err := e.be.SpMM(L.tClean, blk, x.dev[j], !first); err != nil {
			return err
		}
		first = false
	}
	if first {
		e.be.Zero(L.tClean)
	}
	return e.be.GEMM(e.cleanBuf(L, L.dout), L.tClean, e.m.W[l], false)
}

// backward propagates g = ∂L/∂logits and leaves every weight and bias
// gradient of this rank's rows in the layers (before the allreduce).
func (e *Engine) backward(epoch int, g *matrix.Dense) error {
	for l := len(e.layers) - 1; l >= 0; l-- {
		L := e.layers[l]
		w := e.m.W[l]
		e.be.ColumnSums(L.db, g)
		var err error
		switch L.mode {
		case modeLocal:
			err = e.input.MulT(L.dW, g)
		case modeAggFirst:
			// ∇W = T_iᵀ G_i needs no communication; the input gradient
			// Â·(G Wᵀ) does, at the narrower width din.
			if err = e.be.GEMMTN(L.dW, L.t, g); err == nil {
				if err = e.be.GEMMNT(L.dT, g, w); err == nil {
					e.clip(L.dT)
					err = e.exchangeGradient(L.grad, epoch, L.dIn, L.dT)
				}
			}
		case modeTransform:
			// Â·G at width dout, then ∇W = H_iᵀ(ÂG)_i and ∂H = (ÂG)Wᵀ.
			e.clip(g)
			if err = e.exchangeGradient(L.grad, epoch, L.dU, g); err == nil {
				if l == 0 {
					err = e.input.MulT(L.dW, L.dU)
				} else if err = e.be.GEMMTN(L.dW, L.in, L.dU); err == nil {
					err = e.be.GEMMNT(L.dIn, L.dU, w)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("backward layer %d: %w", l+1, err)
		}
		if l > 0 {
			e.be.Dropout(e.mask(epoch, l, true), L.dIn, L.dIn) // dropout's backward is the same mask
			e.be.ReLUBackward(L.dIn, e.layers[l-1].z)
			g = L.dIn
		}
	}
	if err := e.be.Err(); err != nil {
		return fmt.Errorf("backward on %s: %w", e.be.Name(), err)
	}
	return nil
}

// step sums gradients over ranks, adds weight decay and applies Adam.
// Every rank ends with bit-identical parameters.
func (e *Engine) step() error {
	if err := e.reduceGradients(); err != nil {
		return err
	}
	if wd := float32(e.cfg.WeightDecay); wd > 0 {
		for i, v := range e.m.W[0].Data {
			e.grads[i] += wd * v
		}
	}
	e.opt.Update(e.m.Flat(), e.grads)
	return nil
}

// reduceGradients packs every layer's ∇W and ∇b into one buffer and sums it
// over ranks with one allreduce.
func (e *Engine) reduceGradients() error {
	off := 0
	for _, L := range e.layers {
		off += copy(e.grads[off:], e.host(L.dW))
		off += copy(e.grads[off:], L.db)
	}
	start := time.Now()
	if err := collectives.Allreduce(e.c, e.grads); err != nil {
		return fmt.Errorf("gradient allreduce: %w", err)
	}
	e.clock.comm += time.Since(start)
	e.clock.wait += time.Since(start)
	return nil
}

package train

// The loss reads the last layer's output at the training rows alone, so a
// training pass computes the last layer's product only where it is read:
//
//	forward   Z = Σ_j Â_ij·B_j over blocks whose other rows are empty, so
//	          only the training rows' sums are formed;
//	backward  Σ_j Â_ij·G_j over only the columns of root j's training
//	          rows: ∂L/∂Z is zero on every other row (the loss writes only
//	          its own), and so is G = ∂L/∂Z·Wᵀ.
//
// Nothing the loss or a gradient depends on changes: the forward rows that
// are formed are formed exactly as before, and the backward terms left out
// are products with zero rows (only the order in which the backward sums
// its remaining terms differs). With a tenth of the nodes in training, both
// products do a tenth of the work. On a backend with row operations
// (kernels.RowsOf) the forward product writes the training rows alone (not
// zeros into the others), the bias, the loss gradient (whose other rows stay
// zero: nothing else writes it) and the bias gradient are taken there
// alone, and so, aggregating first, are the products with W (Z = T·W,
// ∇W = TᵀG, ∂T = G·Wᵀ); dropout draws only the rows the restricted
// blocks read, and layer 1 on ÂX runs at those rows (restrictInput).
// Under the sparse exchange only the rows the restricted blocks read
// travel (the neighbours of training rows forward, training rows
// backward), received straight into cache slots that hold only them.
// Evaluation multiplies the full blocks (its own cache). --full-output
// turns all of this off.

import (
	"fmt"
	"slices"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
)

// rowsAt is the row operations layer l runs at the training rows
// (e.out.rows, in ascending order for locality) in a training pass: the
// restricted last layer's (nil for every other layer, or when every row is
// computed).
func (e *Engine) rowsAt(l int) kernels.RowOps {
	if l != len(e.layers)-1 {
		return nil
	}
	return e.out.rowOps
}

// restrictOutput gives the last layer's training caches the restricted
// blocks: a GCN layer (either order of Â· and ·W) or a GraphSAGE layer in
// global-batch training. A GraphSAGE layer on a hidden layer's rows also
// forms its root term, and so its bias and loss, at the training rows
// alone (a one-layer model's root term reads the input operand, which has
// no row product there, so it keeps its full passes).
//
// A GAT layer attends at its training targets alone, and its neighbour
// side sums over them alone: every other target's gradient row is zero.
// Its other rows' outputs are zero and their gradient rows carry no
// softmax (lse = −∞), so it is restricted only where those rows never
// travel: where the neighbour sums are reduced, or on one rank
// (restrictAttention). All its rows still travel: slots shrunk to the rows
// read would renumber its blocks' columns, whose node ids key its dropout.
func (e *Engine) restrictOutput() error {
	if e.plan.Exchange.FullOutput || e.batch != nil {
		return nil
	}
	last := e.layers[len(e.layers)-1]
	rowsToo := true // the bias, loss and products with W at the training rows (below)
	switch L := last.(type) {
	case *sageLayer:
		rowsToo = !L.first
	case *aggregateLayer, *transformLayer:
	case *gatLayer:
		if L.red == nil && e.P > 1 {
			return nil
		}
		return e.restrictAttention(L)
	default:
		return nil
	}
	trained, err := e.trainingNodes()
	if err != nil {
		return err
	}
	c := last.base()
	c.fwd.blocks, c.grad.blocks = keep(c.fwd.full, e.ownTraining(), nil), e.trainingColumns(c.grad.full, trained)
	// Rows travel partly only as a float32 copy or one encoded afresh:
	// --wire-delta and --cache-bits keep whole copies (as cluster batches).
	x, sparse := e.net.x.(*sparseExchange)
	if sparse && !e.plan.Wire.Delta && !e.plan.Wire.CacheBits {
		for _, ca := range []*cache{c.fwd, c.grad} {
			var recv [][]int32
			if ca.send, recv, err = e.rowsRead(ca.blocks, x.sendIdx); err != nil {
				return fmt.Errorf("%s: %w", ca.name, err)
			}
			if err := ca.hold(e.be, recv, e.view.ids); err != nil {
				return err
			}
		}
	}
	if (c.fwd.send != nil || e.P == 1) && !e.plan.Wire.Delta && !e.plan.Wire.CacheBits {
		for _, ca := range []*cache{c.fwd, c.grad} {
			ca.wire.enc = ownRowsRead(ca)
		}
	}
	// The bias, the loss gradient and the bias gradient are needed at the
	// training rows alone, and so, aggregating first, are the products
	// with W: where the backend can, only those rows are computed.
	if rowsToo && e.outAtTrainingRows() {
		// Never nil, as the cache's outRows says a product is restricted:
		// a rank without training rows computes none of its rows.
		c.fwd.outRows = e.out.rows
		c.fwd.read = make([][]int32, e.P)
		for j, b := range c.fwd.blocks {
			c.fwd.read[j] = columnsUsed(b)
		}
	}
	e.restrictInput(c)
	return nil
}

// outAtTrainingRows sets the row operations the bias, the loss and the
// bias gradient run at the training rows with (rowsAt), where the backend
// has them, and reports whether it has.
func (e *Engine) outAtTrainingRows() bool {
	ro, ok := kernels.RowsOf(e.be)
	if ok {
		e.out.rowOps, e.out.rows = ro, append([]int32{}, slices.Sorted(slices.Values(e.s.Train))...)
	}
	return ok
}

// restrictAttention restricts a GAT last layer (restrictOutput): its
// forward to the training targets, and its neighbour side to them, the
// gradient rows' blocks on one rank, the transposed blocks where the sums
// are reduced (their columns are this rank's targets). Its other rows'
// outputs are then zero (no edge, no sum), so the bias and the loss are
// taken at the training rows alone.
func (e *Engine) restrictAttention(L *gatLayer) error {
	e.outAtTrainingRows()
	own := e.ownTraining()
	L.fwd.blocks = keep(L.fwd.full, own, nil)
	if L.red == nil {
		trained, err := e.trainingNodes()
		if err != nil {
			return err
		}
		L.grad.blocks = e.trainingColumns(L.grad.full, trained)
		return nil
	}
	L.nbrT, L.nbrOwn = keep(L.nbrT, nil, own), L.nbrOwn.Keep(nil, own)
	return nil
}

// ownTraining marks this rank's training rows.
func (e *Engine) ownTraining() []bool {
	own := make([]bool, e.rows())
	for _, r := range e.s.Train {
		own[r] = true
	}
	return own
}

// keep is every block with only the marked rows' and columns' entries
// (nil: all); a missing block stays missing.
func keep(blocks []*matrix.CSR, rows, cols []bool) []*matrix.CSR {
	out := make([]*matrix.CSR, len(blocks))
	for j, b := range blocks {
		if b != nil {
			out[j] = b.Keep(rows, cols)
		}
	}
	return out
}

// trainingColumns is every root's block with only the columns of training
// nodes (trained, by node id).
func (e *Engine) trainingColumns(blocks []*matrix.CSR, trained []bool) []*matrix.CSR {
	out := make([]*matrix.CSR, len(blocks))
	for j, b := range blocks {
		cols := make([]bool, b.Cols)
		for k := range cols {
			cols[k] = trained[e.srcID(j, k)]
		}
		out[j] = b.Keep(nil, cols)
	}
	return out
}

// hold shrinks the slots of the other roots to the rows the cache's blocks
// read, recv[j] being their positions in root j's slot: the exchange then
// receives straight into the slots (nothing to scatter, no second copy
// of the rows), and a slot holds only rows a product reads. The blocks'
// columns and the rows' node ids (which key dropout) follow the rows to
// their new positions, in the same order, so every sum runs as before.
func (c *cache) hold(be kernels.Backend, recv [][]int32, ids [][]int64) error {
	c.held, c.heldOf = recv, c.rows
	c.rows, c.ids = slices.Clone(c.rows), make([][]int64, len(recv)) // rows is the view's, shared
	for j, pos := range recv {
		if j == c.me {
			continue
		}
		if ids[j] == nil {
			return fmt.Errorf("%s: no node ids for the rows of rank %d", c.name, j)
		}
		c.blocks[j] = compactBlock(c.blocks[j], pos)
		c.rows[j] = len(pos)
	}
	c.slotsLaid(be, matrix.Make[float32](c.slotFloats(false)), false) // this rank's slot stays

	c.mostRows = slices.Max(c.rows) // one masked block, the largest now held
	return nil
}

// heldIDs are the node ids of the rows c holds of root j, viewIDs being
// those of the view's rows: the rows' own ids, or, where c holds only some
// (hold), theirs, made once.
func (c *cache) heldIDs(j int, viewIDs []int64) []int64 {
	if c.held == nil || j == c.me {
		return viewIDs
	}
	if c.ids[j] == nil {
		c.ids[j] = make([]int64, len(c.held[j]))
		for m, p := range c.held[j] {
			c.ids[j][m] = viewIDs[p]
		}
	}
	return c.ids[j]
}

// restrictInput lets layer 1 on the precomputed ÂX multiply only the rows
// the restricted last layer uses: forward, the rows its blocks read (this
// rank's own block's columns and the rows other ranks asked for); backward,
// the rows its gradient blocks write (∂H is zero on all others). Layer 1's
// other rows are then left as they were, so this holds only where nothing
// else reads them: two layers without a residual, and rows that travel
// only as asked (one rank, or the sparse exchange's row sets).
// Variation-gap reads layer 1's noise-free shadow at its own sample rows,
// computed from the whole operand, so its votes are unchanged. Layer 1's
// other rows are left without bias and ReLU too: they are read only where
// ∂H is zero (dropout's and ReLU's backward), which leaves them zero.
func (e *Engine) restrictInput(c *conv) {
	first, ok := e.layers[0].(*localLayer)
	if !ok || len(e.layers) != 2 || e.plan.Model.Residual || (e.P > 1 && c.fwd.send == nil) {
		return
	}
	ri, ok := kernels.InputRowsOf(e.input)
	if !ok {
		return
	}
	written := make([]bool, e.rows())
	for _, b := range c.grad.blocks {
		for r := range b.Rows {
			written[r] = written[r] || b.RowPtr[r+1] > b.RowPtr[r]
		}
	}
	read := c.fwd.wire.enc // the rows a quantized cache encodes, where restrictOutput listed them
	if read == nil {
		read = ownRowsRead(c.fwd)
	}
	first.ri, first.read, first.written = ri, read, listed(written)
	// Its bias and ReLU can then be applied as its rows are written: no
	// other row is read. Not where the rank's whole block is encoded for
	// the wire (its error report would see the other rows change).
	first.fused = !e.plan.Model.Arch.Attends() && (!c.fwd.quantized() || c.fwd.wire.enc != nil)
}

// ownRowsRead are the rows of this rank's block that a restricted cache
// reads where they travel only as asked (sparse rows, or one rank): its
// own block's columns and the rows peers asked for. Layer 1 computes the
// forward's alone (restrictInput), and a quantized cache encodes its own
// alone (wireState.enc): the backward's are training rows, a tenth of
// the block.
func ownRowsRead(c *cache) []int32 {
	read := make([]bool, c.rows[c.me])
	for _, col := range c.blocks[c.me].ColIdx {
		read[col] = true
	}
	for _, rows := range c.send {
		for _, r := range rows {
			read[r] = true
		}
	}
	return listed(read)
}

// listed is the indices set in marks, in order.
func listed(marks []bool) []int32 {
	var out []int32
	for i, m := range marks {
		if m {
			out = append(out, int32(i))
		}
	}
	return out
}

// rowsRead agrees with every root on the rows blocks read: recv[j] are the
// positions in root j's slot that blocks[j] references, and send[i] this
// rank's rows at the positions rank i asked for (sendIdx[i] maps them).
func (e *Engine) rowsRead(blocks []*matrix.CSR, sendIdx [][]int32) (send, recv [][]int32, err error) {
	recv = make([][]int32, e.P)
	for j, b := range blocks {
		if j != e.rank {
			recv[j] = columnsUsed(b)
		}
	}
	asked, err := e.askRoots(recv, e.rows())
	if err != nil {
		return nil, nil, err
	}
	send = make([][]int32, e.P)
	for i, pos := range asked {
		if i == e.rank {
			continue
		}
		send[i] = make([]int32, len(pos))
		for k, p := range pos {
			if int(p) >= len(sendIdx[i]) {
				return nil, nil, fmt.Errorf("rank %d asked for position %d of the %d rows it holds of rank %d", i, p, len(sendIdx[i]), e.rank)
			}
			send[i][k] = sendIdx[i][p]
		}
	}
	return send, recv, nil
}

// trainingNodes marks, by node id, the training rows of every rank (one
// allgather of their ids at start-up).
func (e *Engine) trainingNodes() ([]bool, error) {
	mine := make([]int64, len(e.s.Train))
	for k, r := range e.s.Train {
		mine[k] = e.ownID(int(r))
	}
	counts64, err := collectives.Allgather(e.c, []int64{int64(len(mine))})
	if err != nil {
		return nil, fmt.Errorf("training rows: %w", err)
	}
	counts := make([]int, e.P)
	for j, n := range counts64 {
		counts[j] = int(n)
	}
	all := make([]int64, sum(counts))
	if err := collectives.Allgatherv(e.c, mine, all, counts); err != nil {
		return nil, fmt.Errorf("training rows: %w", err)
	}
	trained := make([]bool, e.s.N)
	for _, id := range all {
		if id < 0 || id >= int64(e.s.N) {
			return nil, fmt.Errorf("training rows: node id %d outside 0..%d", id, e.s.N-1)
		}
		trained[id] = true
	}
	return trained, nil
}

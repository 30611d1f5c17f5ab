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
// products do a tenth of the work. Blocks travel as before, and evaluation
// multiplies the full blocks (its own cache). --full-output turns this off.

import (
	"fmt"

	"sancus/collectives"
	"sancus/kernels/matrix"
)

// restrictOutput gives the last layer's training caches the restricted
// blocks: a GCN layer (either order of Â· and ·W) in global-batch training.
// GraphSAGE's root term and GAT's attention keep their full products.
func (e *Engine) restrictOutput() error {
	if e.cfg.FullOutput || e.batch != nil {
		return nil
	}
	last := e.layers[len(e.layers)-1]
	switch last.(type) {
	case *aggregateLayer, *transformLayer:
	default:
		return nil
	}
	trained, err := e.trainingNodes()
	if err != nil {
		return err
	}
	own := make([]bool, e.rows)
	for _, r := range e.s.Train {
		own[r] = true
	}
	c := last.base()
	fwd, grad := make([]*matrix.CSR, e.P), make([]*matrix.CSR, e.P)
	for j := range e.P {
		fwd[j] = c.fwd.full[j].Keep(own, nil)
		cols := make([]bool, c.grad.full[j].Cols)
		for k := range cols {
			cols[k] = trained[e.srcID(j, k)]
		}
		grad[j] = c.grad.full[j].Keep(nil, cols)
	}
	c.fwd.blocks, c.grad.blocks = fwd, grad
	return nil
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

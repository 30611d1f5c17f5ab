package train

// The layer kinds (layers.go, sage.go, gat.go) run a pass against a site:
// what a layer may ask of the engine, in three concerns. A layer reaches
// its blocks through the exchange, its arithmetic through the kernels and
// operands, and variation-gap's sample through the drift sample; it cannot
// reach the optimizer, the run report, checkpoints or the communicator.
// TestRoomsReachOnlyDown keeps the layer files off *Engine, and
// TestLayersRunOnASite runs layers on a stub site with no engine at all.

import (
	"sancus/kernels"
	"sancus/kernels/matrix"
)

// layerSite is what a layer's forward and backward may ask of the engine.
type layerSite interface {
	exchangeSite
	kernelSite
	driftSite
}

// exchangeSite is Algorithm 3 for one product (sancus.go) and its
// transpose (reduce.go): the only way a layer's rows reach other ranks.
type exchangeSite interface {
	// aggregate computes out = Σ_j Â_ij · M(B_j) through cache c.
	aggregate(c *cache, epoch int, out *matrix.Dense, own ownRows, ref *matrix.Dense, mask matrix.Mask) error
	// communicate moves the active roots' blocks into c and calls use(j)
	// for each root as its block becomes usable.
	communicate(c *cache, epoch int, own *ownRows, ref *matrix.Dense, use func(j int) error) error
	// reduce sends each peer the sums peer forms for its rows and adds
	// what the peers send into dst.
	reduce(r *reduction, epoch int, dst []*matrix.Dense, peer func(j int, out []*matrix.Dense) error, own func() error) error
	// ownBlock is root j's rows as a product reads them.
	ownBlock(c *cache, j int, own *matrix.Dense) *matrix.Dense
	// clip scales a gradient block to this rank's threshold before it
	// travels.
	clip(d *matrix.Dense)
}

// kernelSite is where a layer computes: the backend, layer 1's operands,
// the model's tensors for a layer, this pass's dropout masks, and the rows
// a restricted last layer computes at.
type kernelSite interface {
	backend() kernels.Backend
	// operand is layer 1's input (ÂX when precomputed, else X);
	// meanOperand GraphSAGE's precomputed D⁻¹AX (nil: none).
	operand() kernels.Input
	meanOperand() kernels.Input
	weights(l int) weights
	// outputRows are the row operations and rows layer l computes at in a
	// training pass (nil: every row).
	outputRows(l int) (kernels.RowOps, []int32)
	mask(epoch, l int, train bool) matrix.Mask
	nextDrops(epoch int) matrix.Mask
	dropInput(c *conv, p pass, mask matrix.Mask, dst, h *matrix.Dense)
	// stepDegrees are 1/deg of this rank's rows within the current
	// cluster batch, and whether a step of one is under way.
	stepDegrees() ([]float32, bool)
}

// driftSite is variation-gap's row sample (drift.go).
type driftSite interface {
	// sampleOperand is layer 1's input at the sample rows, noise-free.
	sampleOperand() kernels.Input
	sampleBuf(buf **matrix.Dense, cols int) *matrix.Dense
	sampled(in act, buf **matrix.Dense) (*matrix.Dense, error)
	cleanRef(out *matrix.Dense, first bool, in act, w *matrix.Dense, buf **matrix.Dense) error
	sampleRowsOf(b *matrix.CSR) *matrix.CSR
}

var _ layerSite = (*Engine)(nil)

// weights are layer l's tensors: W and b always, Root for GraphSAGE, the
// attention vectors for GAT (nil where the model has none).
type weights struct {
	W, Root, AttL, AttR *matrix.Dense
	B                   []float32
}

func (e *Engine) weights(l int) weights {
	w := weights{W: e.m.W[l], B: e.m.B[l]}
	if e.m.Root != nil {
		w.Root = e.m.Root[l]
	}
	if e.m.AttL != nil {
		w.AttL, w.AttR = e.m.AttL[l], e.m.AttR[l]
	}
	return w
}

func (e *Engine) backend() kernels.Backend     { return e.be }
func (e *Engine) operand() kernels.Input       { return e.input }
func (e *Engine) meanOperand() kernels.Input   { return e.meanX }
func (e *Engine) sampleOperand() kernels.Input { return e.drift.in }

func (e *Engine) outputRows(l int) (kernels.RowOps, []int32) {
	ro := e.rowsAt(l)
	if ro == nil {
		return nil, nil
	}
	return ro, e.out.rows
}

func (e *Engine) stepDegrees() ([]float32, bool) {
	if !e.batch.stepping() {
		return nil, false
	}
	return e.batch.invDeg, true
}

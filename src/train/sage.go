package train

// GraphSAGE-mean (as PyG's SAGEConv): h'_i = W·mean_{j∈N(i)} h_j + Root·h_i + b.
// Its aggregation is Algorithm 3 unchanged, over the row-normalized
// adjacency M = D⁻¹A (no self loops) instead of Â. M is not symmetric, so
// the backward pass computes Mᵀg = A·(D⁻¹g): each owner scales its gradient
// rows by 1/deg before they travel, and every rank multiplies the plain
// pattern A. Both use the same blocks, compaction and exchange as Â (self
// loops are zeroed, not removed), so the same rows travel.

import (
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/staleness"
)

// sageBlocks derives M = D⁻¹A and A from the view's Â blocks, and this
// rank's 1/deg (deg(A); 0 for an isolated node).
func (e *Engine) sageBlocks() (mean, adj []*matrix.CSR, invDeg []float32) {
	invDeg = graph.MeanWeights(e.view.blocks)
	for j, b := range e.view.blocks {
		m := &matrix.CSR{Rows: b.Rows, Cols: b.Cols, RowPtr: b.RowPtr, ColIdx: b.ColIdx, Val: make([]float32, len(b.Val))}
		a := &matrix.CSR{Rows: b.Rows, Cols: b.Cols, RowPtr: b.RowPtr, ColIdx: b.ColIdx, Val: make([]float32, len(b.Val))}
		for r := range b.Rows {
			for p := b.RowPtr[r]; p < b.RowPtr[r+1]; p++ {
				if j == e.rank && int(b.ColIdx[p]) == r {
					continue // the self loop is not a neighbour
				}
				m.Val[p], a.Val[p] = invDeg[r], 1
			}
		}
		mean, adj = append(mean, m), append(adj, a)
	}
	return mean, adj, invDeg
}

// sageLayer sends dropout(H)·W, the neighbours' transform: Z = M·(H̃W) +
// H̃·Root, H̃ = dropout(H). Layer 1 reads the input operand X.
type sageLayer struct {
	conv
	first      bool
	in         *matrix.Dense // H̃ (hidden layers)
	u, dU, dIn *matrix.Dense
	scaled     *matrix.Dense // D⁻¹g, what the gradient exchange sends
	dR         *matrix.Dense
	invDeg     []float32
	refBuf     *matrix.Dense
	ops        kernels.ElementOps // D⁻¹ on gradients
}

func (L *sageLayer) kind() string { return "graphsage-mean (send HW)" }

func (L *sageLayer) forward(e *Engine, p pass, in act) (act, error) {
	w, root, mask := e.m.W[L.l], e.m.Root[L.l], e.mask(p.epoch, L.l, p.train)
	var err error
	// The root term is written into Z, and the neighbours' blocks sum into
	// it (ownRows.into).
	rootTerm := func() error { return e.be.GEMM(L.z, L.in, root, false) }
	switch ro := e.rowsAt(L.l); {
	case L.first:
		rootTerm = func() error { return e.input.Mul(L.z, root) }
	case p.train && ro != nil: // the loss reads the training rows alone (output.go)
		rootTerm = func() error { return ro.GEMMRows(L.z, L.in, root, e.out.rows) }
	}
	if L.first {
		e.input.SetDropout(mask)
		err = e.input.Mul(L.u, w)
	} else {
		e.dropInput(&L.conv, p, mask, L.in, in.h)
		err = e.be.GEMM(L.u, L.in, w, false)
	}
	if err != nil {
		return act{}, err
	}
	var ref *matrix.Dense
	if p.shadow { // the drift of H̄·W, H̄ without dropout
		ref = e.sampleBuf(&L.refBuf, L.dout)
		if err = e.cleanRef(ref, L.first, in, w, &L.sampIn); err != nil {
			return act{}, err
		}
	}
	return act{h: L.z}, e.aggregate(L.cacheFor(p), p.epoch, L.z, ownRows{rows: L.u, meanwhile: rootTerm, into: true}, ref, matrix.Mask{})
}

// sageLocalLayer is layer 1 on the precomputed D⁻¹AX: Z =
// dropout(D⁻¹AX)·W + dropout(X)·Root, with no communication. Dropout
// falls on the neighbours' mean, not on each neighbour's X (as ÂX's does
// for a GCN); without dropout it is the layer above, summed in another
// order.
type sageLocalLayer struct {
	conv
	dR      *matrix.Dense
	addRoot func(z, root *matrix.Dense) error // z += dropout(X)·Root
}

func (e *Engine) newSAGELocalLayer(c conv) *sageLocalLayer {
	L := &sageLocalLayer{conv: c, dR: e.be.NewDense(c.din, c.dout)}
	L.extraGrads = []*matrix.Dense{L.dR}
	L.addRoot = e.mulAdder(e.input, e.rows(), c.dout)
	return L
}

// mulAdder is z += in·w: summed by the product itself where the input
// can, else through a product of its own and a sum.
func (e *Engine) mulAdder(in kernels.Input, rows, cols int) func(z, w *matrix.Dense) error {
	if a, ok := kernels.InputAddOf(in); ok {
		return a.MulAdd
	}
	tmp, ops := e.be.NewDense(rows, cols), e.elementOps()
	return func(z, w *matrix.Dense) error {
		if err := in.Mul(tmp, w); err != nil {
			return err
		}
		ops.Add(z, tmp)
		return nil
	}
}

func (L *sageLocalLayer) kind() string { return "graphsage-mean (precomputed D⁻¹AX)" }

func (L *sageLocalLayer) forward(e *Engine, p pass, _ act) (act, error) {
	mask := e.mask(p.epoch, 0, p.train)
	e.meanX.SetDropout(mask)
	e.input.SetDropout(mask)
	if err := e.meanX.Mul(L.z, e.m.W[0]); err != nil {
		return act{}, err
	}
	if err := L.addRoot(L.z, e.m.Root[0]); err != nil {
		return act{}, err
	}
	return act{h: L.z}, nil
}

func (L *sageLocalLayer) backward(e *Engine, _ int, g *matrix.Dense) (*matrix.Dense, error) {
	if err := e.meanX.MulT(L.dW, g); err != nil {
		return nil, err
	}
	return nil, e.input.MulT(L.dR, g)
}

// backward: the neighbour path sends D⁻¹g and multiplies A (Mᵀg); the root
// path is local: ∇Root = H̃ᵀg, ∂H̃ += g·Rootᵀ.
func (L *sageLayer) backward(e *Engine, epoch int, g *matrix.Dense) (*matrix.Dense, error) {
	e.clip(g)
	invDeg := L.invDeg
	if e.batch.stepping() {
		invDeg = e.batch.invDeg
	}
	L.ops.ScaleRows(L.scaled, g, invDeg)
	w, root := e.m.W[L.l], e.m.Root[L.l]
	rootGrad := func() error { return e.be.GEMMTN(L.dR, L.in, g) }
	if ro := e.rowsAt(L.l); ro != nil { // g is zero off the training rows
		rootGrad = func() error { return ro.GEMMTNRows(L.dR, L.in, g, e.out.rows) }
	}
	rootTerm := func() error { // reads g alone: computed while D⁻¹g travels
		if L.first {
			return e.input.MulT(L.dR, g)
		}
		if err := rootGrad(); err != nil {
			return err
		}
		return e.be.GEMMNT(L.dIn, g, root) // every row: the neighbour path adds into it
	}
	if err := e.aggregate(L.grad, epoch, L.dU, ownRows{rows: L.scaled, meanwhile: rootTerm}, nil, matrix.Mask{}); err != nil {
		return nil, err
	}
	if L.first {
		return nil, e.input.MulT(L.dW, L.dU)
	}
	if err := e.be.GEMMTN(L.dW, L.in, L.dU); err != nil {
		return nil, err
	}
	if err := e.be.GEMM(L.dIn, L.dU, w.T(), true); err != nil { // ∂H̃ += ∂U·Wᵀ
		return nil, err
	}
	return L.dIn, nil
}

// addInto sets a += b where the backend computes.
func (e *Engine) addInto(a, b *matrix.Dense) { e.elementOps().Add(a, b) }

// elementOps are the backend's element operations, or the same on host
// copies for a backend without them.
func (e *Engine) elementOps() kernels.ElementOps {
	if ops, ok := kernels.ElementOpsOf(e.be); ok {
		return ops
	}
	return hostOps{e}
}

// newSAGELayer makes layer l of a GraphSAGE model.
func (e *Engine) newSAGELayer(c conv, gradPolicy staleness.Policy) *sageLayer {
	r := e.rows()
	if e.part.sage.mean == nil {
		e.part.sage.mean, e.part.sage.adj, e.part.sage.invDeg = e.sageBlocks()
	}
	L := &sageLayer{conv: c, first: c.l == 0, u: e.be.NewDense(r, c.dout), dU: e.be.NewDense(r, c.dout),
		scaled: e.be.NewDense(r, c.dout), dR: e.be.NewDense(c.din, c.dout), invDeg: e.part.sage.invDeg, ops: e.elementOps()}
	L.extraGrads = []*matrix.Dense{L.dR}
	if !L.first {
		L.in, L.dIn = e.be.NewDense(r, c.din), e.be.NewDense(r, c.din)
	}
	e.addCachesOver(&L.conv, c.dout, c.dout, e.plan.Wire.Grad.Bits(), gradPolicy, e.part.sage.mean, e.part.sage.adj)
	return L
}

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
)

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

func (L *sageLayer) forward(s layerSite, p pass, in act) (act, error) {
	ws, mask := s.weights(L.l), s.mask(p.epoch, L.l, p.train)
	w, root, be, x := ws.W, ws.Root, s.backend(), s.operand()
	var err error
	// The root term is written into Z, and the neighbours' blocks sum into
	// it (ownRows.into).
	rootTerm := func() error { return be.GEMM(L.z, L.in, root, false) }
	switch ro, rows := s.outputRows(L.l); {
	case L.first:
		rootTerm = func() error { return x.Mul(L.z, root) }
	case p.train && ro != nil: // the loss reads the training rows alone (output.go)
		rootTerm = func() error { return ro.GEMMRows(L.z, L.in, root, rows) }
	}
	if L.first {
		x.SetDropout(mask)
		err = x.Mul(L.u, w)
	} else {
		s.dropInput(&L.conv, p, mask, L.in, in.h)
		err = be.GEMM(L.u, L.in, w, false)
	}
	if err != nil {
		return act{}, err
	}
	var ref *matrix.Dense
	if p.shadow { // the drift of H̄·W, H̄ without dropout
		ref = s.sampleBuf(&L.refBuf, L.dout)
		if err = s.cleanRef(ref, L.first, in, w, &L.sampIn); err != nil {
			return act{}, err
		}
	}
	return act{h: L.z}, s.aggregate(L.cacheFor(p), p.epoch, L.z, ownRows{rows: L.u, meanwhile: rootTerm, into: true}, ref, matrix.Mask{})
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

func (L *sageLocalLayer) kind() string { return "graphsage-mean (precomputed D⁻¹AX)" }

func (L *sageLocalLayer) forward(s layerSite, p pass, _ act) (act, error) {
	mask, mean, w := s.mask(p.epoch, 0, p.train), s.meanOperand(), s.weights(0)
	mean.SetDropout(mask)
	s.operand().SetDropout(mask)
	if err := mean.Mul(L.z, w.W); err != nil {
		return act{}, err
	}
	if err := L.addRoot(L.z, w.Root); err != nil {
		return act{}, err
	}
	return act{h: L.z}, nil
}

func (L *sageLocalLayer) backward(s layerSite, _ int, g *matrix.Dense) (*matrix.Dense, error) {
	if err := s.meanOperand().MulT(L.dW, g); err != nil {
		return nil, err
	}
	return nil, s.operand().MulT(L.dR, g)
}

// backward: the neighbour path sends D⁻¹g and multiplies A (Mᵀg); the root
// path is local: ∇Root = H̃ᵀg, ∂H̃ += g·Rootᵀ.
func (L *sageLayer) backward(s layerSite, epoch int, g *matrix.Dense) (*matrix.Dense, error) {
	s.clip(g)
	invDeg := L.invDeg
	if d, ok := s.stepDegrees(); ok {
		invDeg = d
	}
	L.ops.ScaleRows(L.scaled, g, invDeg)
	ws, be := s.weights(L.l), s.backend()
	w, root := ws.W, ws.Root
	rootGrad := func() error { return be.GEMMTN(L.dR, L.in, g) }
	if ro, rows := s.outputRows(L.l); ro != nil { // g is zero off the training rows
		rootGrad = func() error { return ro.GEMMTNRows(L.dR, L.in, g, rows) }
	}
	rootTerm := func() error { // reads g alone: computed while D⁻¹g travels
		if L.first {
			return s.operand().MulT(L.dR, g)
		}
		if err := rootGrad(); err != nil {
			return err
		}
		return be.GEMMNT(L.dIn, g, root) // every row: the neighbour path adds into it
	}
	if err := s.aggregate(L.grad, epoch, L.dU, ownRows{rows: L.scaled, meanwhile: rootTerm}, nil, matrix.Mask{}); err != nil {
		return nil, err
	}
	if L.first {
		return nil, s.operand().MulT(L.dW, L.dU)
	}
	if err := be.GEMMTN(L.dW, L.in, L.dU); err != nil {
		return nil, err
	}
	if err := be.GEMM(L.dIn, L.dU, w.T(), true); err != nil { // ∂H̃ += ∂U·Wᵀ
		return nil, err
	}
	return L.dIn, nil
}

package train

import (
	"sancus/kernels"
	"sancus/kernels/matrix"
)

// A layer is one graph convolution over this rank's rows. Each way of
// ordering aggregation (Â·) and transformation (·W) is one type; a new layer
// kind is one more type here (and its set-up in build.go), not a branch in
// the engine. Its passes ask the engine only what a layerSite answers.
type layer interface {
	kind() string
	// forward computes the layer's output before bias and activation from
	// the previous layer's activation (zero for layer 1, which reads the
	// site's input operand).
	forward(s layerSite, p pass, in act) (act, error)
	// backward takes ∂L/∂Z, leaves ∇W in the layer and returns ∂L/∂H of the
	// layer's input (nil for layer 1).
	backward(s layerSite, epoch int, g *matrix.Dense) (*matrix.Dense, error)
	base() *conv
}

// pass is one forward pass: a training epoch (policies may skip, dropout
// on) or an evaluation (always fresh, no dropout).
type pass struct {
	epoch  int
	train  bool
	shadow bool // variation-gap: also compute noise-free shadows
}

// act is an activation and, while variation-gap runs, its noise-free
// shadow (nil when not kept).
//
// The variation gap must see how an embedding moves with the weights, not
// the dropout noise: with dropout 0.5 upstream, consecutive training copies
// of H differ by ~40% even when nothing is learned. So each layer also
// computes its own rows locally from the same inputs with every mask off,
// where it can without more traffic. It costs compute, never bytes.
// activated: h already holds the activation of Z + b at every row that
// is read (the layer applied it as it wrote them). dropped, when set, is h
// at those rows as the next layer drops it this pass (nextDrops).
type act struct {
	h, clean, dropped *matrix.Dense
	activated         bool
}

// conv is what every layer kind shares.
type conv struct {
	l, din, dout    int
	last            bool          // the model's last layer: its output is the logits
	z               *matrix.Dense // output: Z, then H = act(Z + b) in place
	act             activation    // ReLU, or a GAT's ELU (activation.go)
	shadow          *matrix.Dense // noise-free Z at the drift sample (allocated when first used)
	sampIn          *matrix.Dense // the layer's input at the drift sample, where it had no shadow
	dW              *matrix.Dense
	db              []float32
	fwd, grad, eval *cache // nil for a layer that sends nothing
	// extraGrads are the gradients of the layer's tensors after W and b
	// (model.Tensors order): GraphSAGE's root weight, GAT's attention.
	extraGrads []*matrix.Dense
	// dropped is the output as the next layer drops it (act.dropped), and
	// droppedIn the input as this layer dropped it into a matrix of its own
	// (M(H), what its product reads): the same copy, made either side of
	// the layer boundary, for dropout's and ReLU's backward to read instead
	// of drawing again (droppedOutput).
	dropped, droppedIn passCopy
}

// passCopy is a matrix a training pass made for its backward, and which
// pass made it.
type passCopy struct {
	m     *matrix.Dense
	epoch int // 1 + the epoch whose training pass wrote m (0: none)
}

// hold records m as written by epoch's training pass.
func (h *passCopy) hold(m *matrix.Dense, epoch int) { h.m, h.epoch = m, epoch+1 }

// take is m where epoch's training pass wrote it (nil: not), once.
func (h *passCopy) take(epoch int) *matrix.Dense {
	if h.epoch != epoch+1 {
		return nil
	}
	h.epoch = 0
	return h.m
}

func (c *conv) base() *conv { return c }

func (c *conv) caches() []*cache {
	var out []*cache
	for _, x := range []*cache{c.fwd, c.grad, c.eval} {
		if x != nil {
			out = append(out, x)
		}
	}
	return out
}

func (c *conv) cacheFor(p pass) *cache {
	if p.train {
		return c.fwd
	}
	return c.eval
}

// shadowBuf is the layer's noise-free output at the drift sample.
func (c *conv) shadowBuf(s layerSite) *matrix.Dense { return s.sampleBuf(&c.shadow, c.dout) }

// localLayer is layer 1 on the precomputed ÂX: Z = dropout(ÂX)·W, with no
// communication at all.
type localLayer struct {
	conv
	// ri, when set (output.go), multiplies in training at the rows the
	// restricted last layer reads (forward) and writes (backward) alone;
	// fused, it adds the bias and ReLU there as it writes them.
	ri            kernels.RowInput
	read, written []int32
	fused         bool
}

func (L *localLayer) kind() string { return "local (precomputed ÂX)" }

func (L *localLayer) forward(s layerSite, p pass, _ act) (act, error) {
	w, x := s.weights(0), s.operand()
	x.SetDropout(s.mask(p.epoch, 0, p.train))
	var err error
	fused := p.train && L.ri != nil && L.fused
	var then matrix.Mask
	if fused {
		then = s.nextDrops(p.epoch)
	}
	switch {
	case then.P > 0:
		if L.dropped.m == nil {
			L.dropped.m = s.backend().NewDense(L.z.Rows, L.z.Cols)
		}
		err = L.ri.MulRowsBiasReLU(L.z, w.W, w.B, L.read, then, L.dropped.m)
		L.dropped.hold(L.dropped.m, p.epoch)
	case fused:
		err = L.ri.MulRowsBiasReLU(L.z, w.W, w.B, L.read, matrix.Mask{}, nil)
	case p.train && L.ri != nil:
		err = L.ri.MulRows(L.z, w.W, L.read)
	default:
		err = x.Mul(L.z, w.W)
	}
	if err != nil {
		return act{}, err
	}
	out := act{h: L.z, activated: fused}
	if then.P > 0 {
		out.dropped = L.dropped.m
	}
	if p.shadow {
		out.clean = L.shadowBuf(s)
		if err = s.sampleOperand().Mul(out.clean, w.W); err != nil {
			return act{}, err
		}
	}
	return out, nil
}

func (L *localLayer) backward(s layerSite, _ int, g *matrix.Dense) (*matrix.Dense, error) {
	if L.ri != nil {
		return nil, L.ri.MulTRows(L.dW, g, L.written)
	}
	return nil, s.operand().MulT(L.dW, g)
}

// transformLayer sends HW, the narrower side: U = dropout(H)·W, then
// Z = Σ_j Â_ij U_j. Layer 1 (without ÂX) reads the input operand X.
type transformLayer struct {
	conv
	first  bool          // reads the input operand, not a previous layer
	in     *matrix.Dense // dropout(H) (hidden layers)
	u, dU  *matrix.Dense
	dIn    *matrix.Dense
	refBuf *matrix.Dense // H̄·W without dropout at the drift sample: what variation-gap measures
}

func (L *transformLayer) kind() string { return "transform-first (send HW)" }

func (L *transformLayer) forward(s layerSite, p pass, in act) (act, error) {
	w, mask := s.weights(L.l).W, s.mask(p.epoch, L.l, p.train)
	var err error
	if L.first {
		x := s.operand()
		x.SetDropout(mask)
		err = x.Mul(L.u, w)
	} else {
		s.dropInput(&L.conv, p, mask, L.in, in.h)
		err = s.backend().GEMM(L.u, L.in, w, false)
	}
	if err != nil {
		return act{}, err
	}
	var ref *matrix.Dense
	if p.shadow {
		ref = s.sampleBuf(&L.refBuf, L.dout)
		if err = s.cleanRef(ref, L.first, in, w, &L.sampIn); err != nil {
			return act{}, err
		}
	}
	// U carries the owner's dropout, so there is no noise-free output
	// without more traffic: the next layer measures on H as trained.
	return act{h: L.z}, s.aggregate(L.cacheFor(p), p.epoch, L.z, ownRows{rows: L.u}, ref, matrix.Mask{})
}

// backward: Â·G at width dout, then ∇W = dropout(H)ᵀ(ÂG) and ∂H = (ÂG)Wᵀ.
func (L *transformLayer) backward(s layerSite, epoch int, g *matrix.Dense) (*matrix.Dense, error) {
	s.clip(g)
	if err := s.aggregate(L.grad, epoch, L.dU, ownRows{rows: g}, nil, matrix.Mask{}); err != nil {
		return nil, err
	}
	if L.first {
		return nil, s.operand().MulT(L.dW, L.dU)
	}
	be := s.backend()
	if err := be.GEMMTN(L.dW, L.in, L.dU); err != nil {
		return nil, err
	}
	return L.dIn, be.GEMMNT(L.dIn, L.dU, s.weights(L.l).W)
}

// aggregateLayer sends H, the narrower side: T = Σ_j Â_ij · dropout(H_j),
// then Z = T·W. Raw H travels and is cached, and every receiver applies
// the owner's dropout mask (keyed by node id), unless no root can be
// stale: then the owner drops its rows as it sends them (senderMask).
type aggregateLayer struct {
	conv
	t, dT, dIn *matrix.Dense
	tClean     *matrix.Dense
}

func (L *aggregateLayer) kind() string { return "aggregate-first (send H)" }

func (L *aggregateLayer) forward(s layerSite, p pass, in act) (act, error) {
	var ref *matrix.Dense
	if p.shadow {
		var err error
		if ref, err = s.sampled(in, &L.sampIn); err != nil {
			return act{}, err
		}
	}
	c := L.cacheFor(p)
	// in.dropped: nextDrops made it for this cache's product.
	err := s.aggregate(c, p.epoch, L.t, ownRows{rows: in.h, dropped: in.dropped}, ref, s.mask(p.epoch, L.l, p.train))
	if err != nil {
		return act{}, err
	}
	w := s.weights(L.l).W
	if ro, rows := s.outputRows(L.l); p.train && ro != nil {
		err = ro.GEMMRows(L.z, L.t, w, rows)
	} else {
		err = s.backend().GEMM(L.z, L.t, w, false)
	}
	if err != nil {
		return act{}, err
	}
	out := act{h: L.z}
	if p.shadow && !L.last { // the logits' shadow has no reader
		out.clean, err = L.cleanOutput(s, c)
		return out, err
	}
	return out, nil
}

// cleanOutput recomputes this layer's rows at the drift sample from the
// blocks it just used (fresh or cached), without the dropout mask.
func (L *aggregateLayer) cleanOutput(s layerSite, c *cache) (*matrix.Dense, error) {
	be, tClean := s.backend(), s.sampleBuf(&L.tClean, L.din)
	first := true
	for j, blk := range c.blocks {
		if blk.NNZ() == 0 {
			continue
		}
		if err := c.spmm(be, tClean, s.sampleRowsOf(blk), j, !first); err != nil {
			return nil, err
		}
		first = false
	}
	if first {
		be.Zero(tClean)
	}
	out := L.shadowBuf(s)
	return out, be.GEMM(out, tClean, s.weights(L.l).W, false)
}

// backward: ∇W = TᵀG needs no communication; the input gradient Â·(G Wᵀ)
// does, at the narrower width din.
func (L *aggregateLayer) backward(s layerSite, epoch int, g *matrix.Dense) (*matrix.Dense, error) {
	w := s.weights(L.l).W
	if ro, rows := s.outputRows(L.l); ro != nil {
		// G is zero off the training rows, so ∇W has no terms there and ∂T
		// is zero there: never written, ∂T's other rows stay as allocated.
		if err := ro.GEMMTNRows(L.dW, L.t, g, rows); err != nil {
			return nil, err
		}
		if err := ro.GEMMNTRows(L.dT, g, w, rows); err != nil {
			return nil, err
		}
	} else {
		be := s.backend()
		if err := be.GEMMTN(L.dW, L.t, g); err != nil {
			return nil, err
		}
		if err := be.GEMMNT(L.dT, g, w); err != nil {
			return nil, err
		}
	}
	s.clip(L.dT)
	return L.dIn, s.aggregate(L.grad, epoch, L.dIn, ownRows{rows: L.dT}, nil, matrix.Mask{})
}

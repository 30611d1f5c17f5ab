package train

// The layers made, once, at set-up: each kind's buffers, caches and
// blocks, from the plan and the view. This is the engine's side of the
// layer kinds: what it resolves here (widths, wire states, node ids,
// GraphSAGE's and GAT's blocks) a layer then keeps, so its passes need
// only a layerSite.

import (
	"fmt"

	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/shard"
	"sancus/src/staleness"
)

// newLayer picks layer l's kind: layer 1 on a precomputed ÂX or D⁻¹AX
// needs no communication; otherwise the narrower of H (aggregate first) and HW
// (transform first) travels. The raw input is never sent: XW is narrower.
func (e *Engine) newLayer(l, din, dout int, gradPolicy staleness.Policy) layer {
	r := e.rows()
	c := conv{l: l, din: din, dout: dout, last: l == e.plan.Model.Layers-1,
		z: e.be.NewDense(r, dout), dW: e.be.NewDense(din, dout), db: make([]float32, dout), act: e.activation()}
	switch agg := e.precomputed(); {
	case l == 0 && agg == shard.Mean:
		return e.newSAGELocalLayer(c)
	case e.plan.Model.Arch.HasRoot():
		return e.newSAGELayer(c, gradPolicy)
	case e.plan.Model.Arch.Attends():
		return e.newGATLayer(c, gradPolicy)
	case l == 0 && agg == shard.Sym:
		return &localLayer{conv: c}
	case l == 0 || din > dout:
		L := &transformLayer{conv: c, first: l == 0, u: e.be.NewDense(r, dout), dU: e.be.NewDense(r, dout)}
		if l > 0 {
			L.in, L.dIn = e.be.NewDense(r, din), e.be.NewDense(r, din)
		}
		e.addCaches(&L.conv, dout, gradPolicy)
		return L
	default:
		L := &aggregateLayer{conv: c, t: e.be.NewDense(r, din), dT: e.be.NewDense(r, din), dIn: e.be.NewDense(r, din)}
		e.addCaches(&L.conv, din, gradPolicy)
		return L
	}
}

// activation is what a layer applies after its bias, chosen once.
func (e *Engine) activation() activation {
	if !e.plan.Model.Arch.ELU() {
		return relu{e.be}
	}
	if ops, ok := kernels.ELUOf(e.be); ok {
		return elu{e.be, ops}
	}
	return elu{e.be, hostOps{e.be}}
}

// addCaches makes a communicating layer's caches. Evaluation blocks travel
// as float32 always: accuracy is measured on the model, not on the wire.
func (e *Engine) addCaches(c *conv, width int, gradPolicy staleness.Policy) {
	e.addCachesOver(c, width, width, e.plan.Wire.Grad.Bits(), gradPolicy, e.view.blocks, e.view.blocks)
}

// addCachesOver makes the caches of a layer whose forward rows (width fw)
// multiply fwd and whose gradient rows (width gw; 0: the layer reduces its
// gradients and caches none) multiply grad.
func (e *Engine) addCachesOver(c *conv, fw, gw, gradBits int, gradPolicy staleness.Policy, fwd, grad []*matrix.CSR) {
	name := fmt.Sprintf("layer %d", c.l+1)
	w := func(bits int, dir uint64) wireState {
		return wireState{bits: bits, delta: e.plan.Wire.Delta, maxErr: e.plan.Wire.Error, stream: wireStream(c.l, dir),
			keepPacked: e.plan.Wire.CacheBits && bits != wire.FP32}
	}
	if e.plan.Wire.CacheBits && e.packed == nil {
		e.packed = &packedScratch{}
	}
	c.fwd = newCache(e.be, name+" forward", fw, e.view.rows, fwd, e.plan.policy, w(e.plan.Wire.Fwd.Bits(), dirForward), e.rank, e.packed)
	ew := w(wire.FP32, dirEval)
	ew.lent = lendEval && e.plan.Batch.Mode == BatchGlobal
	c.eval = newCache(e.be, name+" eval", fw, e.view.rows, fwd, staleness.None{}, ew, e.rank, nil)
	if gw > 0 {
		c.grad = newCache(e.be, name+" gradient", gw, e.view.rows, grad, gradPolicy, w(gradBits, dirGradient), e.rank, e.packed)
	}
}

// lendEval is off only in a test, which holds the shared slots to a
// run with slots of every layer's own.
var lendEval = true

// lendEvalSlots gives every layer's evaluation cache its slots in one
// buffer, as large as the largest layer's: an evaluation runs the layers
// one after another, each receiving every peer's rows afresh (policy
// None) before it reads them, and none reads another layer's slots. A
// slot the product never reads (route.direct) gets none.
func (e *Engine) lendEvalSlots() {
	var lent []*cache
	most := 0
	for _, L := range e.layers {
		if c := L.base().eval; c != nil && c.wire.lent {
			lent = append(lent, c)
			most = max(most, c.evalFloats())
		}
	}
	buf := matrix.Make[float32](most)
	for _, c := range lent {
		c.slotsLaid(e.be, buf, !c.route.direct)
	}
}

// evalFloats is what an evaluation cache's slots take, in floats: this
// rank's too, unless the product reads its rows in place (route.direct).
func (c *cache) evalFloats() int { return c.slotFloats(!c.route.direct) }

// The directions of a layer's traffic, which key its wire's rounding.
const (
	dirForward  = 1
	dirEval     = 2
	dirGradient = 3
)

// wireStream keys the rounding of layer l's traffic in one direction.
func wireStream(l int, dir uint64) uint64 { return uint64(l)<<2 | dir }

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

// addInto sets a += b where the backend computes.
func (e *Engine) addInto(a, b *matrix.Dense) { e.elementOps().Add(a, b) }

// elementOps are the backend's element operations, or the same on host
// copies for a backend without them.
func (e *Engine) elementOps() kernels.ElementOps {
	if ops, ok := kernels.ElementOpsOf(e.be); ok {
		return ops
	}
	return hostOps{e.be}
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

func (e *Engine) newGATLayer(c conv, gradPolicy staleness.Policy) *gatLayer {
	r, m := e.rows(), e.m
	L := &gatLayer{conv: c, first: c.l == 0, h: m.Heads[c.l], f: m.HeadWidth(c.l), concat: c.l+1 < m.Layers()}
	L.hf = L.h * L.f
	// The attention's own state lives where its kernels run: on the
	// backend, or on the host beside the CPU's kernels (hostAttention).
	state := e.be.NewDense
	var ok bool
	if L.att, ok = kernels.AttentionOf(e.be); !ok {
		L.att, state = hostAttention{e.be}, matrix.NewDense
	}
	L.st = kernels.GATState{El: state(r, L.h), M: state(r, L.h), S: state(r, L.h), O: state(r, L.hf), O2: state(r, L.hf), C: state(r, L.h)}
	L.dEl, L.dEr = state(r, L.h), state(r, L.h)
	L.u, L.dU = e.be.NewDense(r, L.hf), e.be.NewDense(r, L.hf)
	L.pay, L.gpay = e.be.NewDense(r, L.hf+L.h), e.be.NewDense(r, L.hf+3*L.h)
	L.dAl, L.dAr = e.be.NewDense(1, L.hf), e.be.NewDense(1, L.hf)
	L.dW = e.be.NewDense(c.din, L.hf)
	L.extraGrads = []*matrix.Dense{L.dAl, L.dAr}
	e.attentionIDs()
	L.me, L.ids, L.offsets = e.rank, e.part.attIDs, e.s.Offsets
	L.attP, L.seed = e.attDropout(), e.plan.Optim.Seed
	if !L.first {
		L.in, L.dIn = e.be.NewDense(r, c.din), e.be.NewDense(r, c.din)
	}
	// Reduced, ∂U and ∂er travel as two matrices, each row with its own
	// scale.
	if bits := e.plan.Wire.Grad.Bits(); e.reducesGradients(gradPolicy, bits) {
		e.addCachesOver(&L.conv, L.hf+L.h, 0, bits, gradPolicy, e.view.blocks, nil)
		L.neighbours = L.reduceGradients
		L.red = e.newReduction([]int{L.hf, L.h}, []bool{true, ok}, bits, wireStream(L.l, dirGradient))
		e.transposedBlocks()
		L.nbrT, L.nbrOwn = e.part.blockT, L.fwd.blocks[e.rank]
		return L
	}
	// Broadcast, G sits in a gradient row beside the scores' el, lse and
	// δ, orders of magnitude larger; a quantized row's step, set by its
	// range, would round G to zero, so those 3·heads values travel as
	// bf16, each with its own exponent (wire.Tailed), and G alone at the
	// gradient wire's width.
	e.addCachesOver(&L.conv, L.hf+L.h, L.hf+3*L.h, e.plan.Wire.Grad.Bits(), gradPolicy, e.view.blocks, e.view.blocks)
	L.grad.wire.tail = 3 * L.h
	L.neighbours = L.broadcastGradients
	return L
}

// attentionIDs sets, once, the view's node ids as the attention reads
// them: nil where they count on from the block's first row (a peer's rows
// sent whole, from a contiguous partition), so that the kernels count
// them rather than gather them from memory at every edge.
func (e *Engine) attentionIDs() {
	if e.part.attIDs != nil {
		return
	}
	e.part.attIDs = make([][]int64, e.P)
	for j, ids := range e.view.ids {
		e.part.attIDs[j] = ids
		if countsOn(ids, e.s.Offsets[j]) {
			e.part.attIDs[j] = nil
		}
	}
}

// countsOn reports whether ids are from, from + 1, ….
func countsOn(ids []int64, from int64) bool {
	for k, id := range ids {
		if id != from+int64(k) {
			return false
		}
	}
	return true
}

// transposedBlocks are every peer's block of this rank's view transposed:
// rows the peer's rows held, columns this rank's (Â is symmetric, so a
// peer's rows are its targets' neighbours), made once for every layer.
func (e *Engine) transposedBlocks() {
	if e.part.blockT != nil {
		return
	}
	e.part.blockT = make([]*matrix.CSR, e.P)
	for j, b := range e.view.blocks {
		if j != e.rank {
			e.part.blockT[j] = b.Transpose()
		}
	}
}

// attDropout is the attention dropout probability.
func (e *Engine) attDropout() float64 {
	if e.plan.Model.AttDropout < 0 {
		return e.plan.Model.Dropout
	}
	return e.plan.Model.AttDropout
}

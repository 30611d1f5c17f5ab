package train

// GAT (Veličković et al.). For each head k of a layer, with U = dropout(H)·W,
//
//	s_ij = a_l·U_i + a_r·U_j,  e_ij = LeakyReLU_0.2(s_ij) over j ∈ N(i) ∪ {i},
//	α_ij = softmax_j(e_ij),     out_i = Σ_j d_ij α_ij U_j
//
// (d: attention dropout, keyed by the edge's original node ids). Hidden
// layers concatenate their heads and apply ELU; the last one averages them.
//
// Row i's softmax spans every root's column block. It is taken in one pass,
// block by block as blocks arrive (Algorithm 3's use(j)), with a running
// max m_i and sum s_i per head: when a larger score arrives the partial sum
// and output are rescaled (online softmax). What travels for root j is its
// rows of [U | a_r·U]; a stale root's cached rows are its U and scores as
// last sent, so attention over a stale neighbour weighs its old features by
// its old score against the target's current one.
//
// Backward, per head, with G_i = ∂L/∂out_i and δ_i = G_i·out_i:
//
//	∂s_ij = α_ij (d_ij G_i·U_j − δ_i) · LeakyReLU'(s_ij)
//	∂el_i = Σ_j ∂s_ij = G_i·o2_i − δ_i c_i         target side: local
//	∂U_j  = Σ_i d_ij α_ij G_i, ∂er_j = Σ_i ∂s_ij   neighbour side
//
// where the training forward also summed o2_i = Σ_j α_ij d_ij σ'_ij U_j and
// c_i = Σ_j α_ij σ'_ij (σ' = LeakyReLU'(s_ij)): the target side then costs
// a dot product per row, not a second pass over the edges.
//
// The neighbour side needs, at j's owner, each target's [G_i, el_i, m_i,
// s_i, δ_i]: those rows travel through the gradient cache over the same
// blocks (Â is symmetric: the targets that read row j are j's neighbours),
// and the owner recomputes α_ij from them against the copy of its own rows
// that the targets used.

import (
	"math"

	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/staleness"
)

type gatLayer struct {
	conv
	first    bool
	h, f, hf int  // heads, features per head, h·f
	concat   bool // hidden layer: heads side by side; last: their mean
	in       *matrix.Dense
	u, dU    *matrix.Dense // U = H̃W and its gradient, rows × hf
	pay      *matrix.Dense // [U | er] per row: the forward rows that travel
	gpay     *matrix.Dense // [G | el | m | s | δ] per row: the gradient rows that travel
	el, m, s []float32     // rows × h
	o        []float32     // rows × hf: each head's output
	o2, c    []float32     // rows × hf, rows × h: the target side's sums
	dEl, dEr []float32     // rows × h
	dAl, dAr *matrix.Dense
	dIn      *matrix.Dense
	refU     *matrix.Dense // variation-gap: the noise-free U and its rows
	refPay   *matrix.Dense
	attKey   uint64 // this epoch's attention-dropout key (0: none)
	attKeep  float32
}

func (L *gatLayer) kind() string { return "gat (send [HW | a_r·HW])" }

func (e *Engine) newGATLayer(c conv, gradPolicy staleness.Policy) *gatLayer {
	r, m := e.rows(), e.m
	L := &gatLayer{conv: c, first: c.l == 0, h: m.Heads[c.l], f: m.HeadWidth(c.l), concat: c.l+1 < m.Layers()}
	L.hf = L.h * L.f
	L.u, L.dU = e.be.NewDense(r, L.hf), e.be.NewDense(r, L.hf)
	L.pay, L.gpay = e.be.NewDense(r, L.hf+L.h), e.be.NewDense(r, L.hf+4*L.h)
	L.el, L.m, L.s = make([]float32, r*L.h), make([]float32, r*L.h), make([]float32, r*L.h)
	L.dEl, L.dEr, L.o = make([]float32, r*L.h), make([]float32, r*L.h), make([]float32, r*L.hf)
	L.o2, L.c = make([]float32, r*L.hf), make([]float32, r*L.h)
	L.dAl, L.dAr = e.be.NewDense(1, L.hf), e.be.NewDense(1, L.hf)
	L.dW = e.be.NewDense(c.din, L.hf)
	L.extraGrads = []*matrix.Dense{L.dAl, L.dAr}
	if !L.first {
		L.in, L.dIn = e.be.NewDense(r, c.din), e.be.NewDense(r, c.din)
	}
	e.addCachesOver(&L.conv, L.hf+L.h, L.hf+4*L.h, gradPolicy, e.view.blocks, e.view.blocks)
	return L
}

// transform computes U = H̃·W, H̃ = dropout(in) (layer 1: the input
// operand under the mask); clean computes it without dropout, leaving the
// layer's H̃ alone.
func (L *gatLayer) transform(e *Engine, u, in *matrix.Dense, mask matrix.Mask, clean bool) error {
	w := e.m.W[L.l]
	switch {
	case L.first && clean:
		return e.drift.in.Mul(u, w)
	case L.first:
		e.input.SetDropout(mask)
		return e.input.Mul(u, w)
	case clean:
		return e.be.GEMM(u, in, w, false)
	}
	e.be.Dropout(mask, L.in, in)
	return e.be.GEMM(u, L.in, w, false)
}

// payload writes the rows [U_i | a_r·U_i] into pay and, if el is not nil,
// a_l·U_i into el.
func (L *gatLayer) payload(e *Engine, u []float32, pay *matrix.Dense, el []float32) {
	al, ar, p := e.m.AttL[L.l].Data, e.m.AttR[L.l].Data, e.host(pay)
	w := L.hf + L.h
	kernels.ParallelRows(pay.Rows, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ui, pi := u[i*L.hf:(i+1)*L.hf], p[i*w:(i+1)*w]
			copy(pi, ui)
			for k := range L.h {
				pi[L.hf+k] = dot(ar[k*L.f:(k+1)*L.f], ui[k*L.f:(k+1)*L.f])
				if el != nil {
					el[i*L.h+k] = dot(al[k*L.f:(k+1)*L.f], ui[k*L.f:(k+1)*L.f])
				}
			}
		}
	})
	e.be.Upload(pay)
}

func (L *gatLayer) forward(e *Engine, p pass, in act) (act, error) {
	mask := e.mask(p.epoch, L.l, p.train)
	if err := L.transform(e, L.u, in.h, mask, false); err != nil {
		return act{}, err
	}
	L.payload(e, e.host(L.u), L.pay, L.el)
	var ref *matrix.Dense
	if p.shadow {
		var err error
		if ref, err = L.driftRef(e, in, mask); err != nil {
			return act{}, err
		}
	}
	L.attKey, L.attKeep = 0, 1
	if pa := e.attDropout(); p.train && pa > 0 {
		L.attKey, L.attKeep = wire.Seed(e.cfg.Optim.Seed^0x6a7, uint64(p.epoch)<<8|uint64(L.l)), float32(1-pa)
	}
	for i := range L.m {
		L.m[i], L.s[i] = float32(math.Inf(-1)), 0
	}
	clear(L.o)
	o2, sums := L.o2, L.c
	if !p.train {
		o2, sums = nil, nil
	}
	clear(o2)
	clear(sums)
	c := L.cacheFor(p)
	err := e.communicate(c, p.epoch, &ownRows{rows: L.pay}, ref, func(j int) error {
		if c.blocks[j].NNZ() > 0 {
			kernels.GATAttend(L.block(e, c.blocks[j], e.host(c.block(e.be, j)), j), L.el, L.m, L.s, L.o, o2, sums)
		}
		return nil
	})
	if err != nil {
		return act{}, err
	}
	z := e.host(L.z)
	kernels.ParallelRows(e.rows(), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for k := range L.h {
				if s := L.s[i*L.h+k]; s > 0 {
					kernels.Scale(L.o[i*L.hf+k*L.f:i*L.hf+(k+1)*L.f], 1/s)
				}
			}
			oi, zi := L.o[i*L.hf:(i+1)*L.hf], z[i*L.dout:(i+1)*L.dout]
			if L.concat {
				copy(zi, oi)
				continue
			}
			clear(zi)
			for k := range L.h {
				for x := range L.f {
					zi[x] += oi[k*L.f+x]
				}
			}
			kernels.Scale(zi, 1/float32(L.h))
		}
	})
	e.be.Upload(L.z)
	return act{h: L.z}, nil
}

// driftRef is the payload of the noise-free rows at the drift sample,
// what variation-gap measures this layer's drift on.
func (L *gatLayer) driftRef(e *Engine, in act, mask matrix.Mask) (*matrix.Dense, error) {
	e.sampleBuf(&L.refU, L.hf)
	e.sampleBuf(&L.refPay, L.hf+L.h)
	var x *matrix.Dense
	if !L.first {
		var err error
		if x, err = e.sampled(in, &L.sampIn); err != nil {
			return nil, err
		}
	}
	if err := L.transform(e, L.refU, x, mask, true); err != nil {
		return nil, err
	}
	L.payload(e, e.host(L.refU), L.refPay, nil)
	return L.refPay, nil
}

// block is root j's block of this layer's attention (src: its rows as
// this rank holds them, of either width), with the ids that key dropout.
func (L *gatLayer) block(e *Engine, blk *matrix.CSR, src []float32, j int) *kernels.GATBlock {
	return &kernels.GATBlock{A: blk, Src: src, H: L.h, F: L.f, Key: L.attKey, Keep: L.attKeep,
		RowIDs: e.part.ownIDs, RowID0: e.s.Offsets[e.rank], ColIDs: e.view.ids[j], ColID0: e.s.Offsets[j]}
}

func (L *gatLayer) backward(e *Engine, epoch int, g *matrix.Dense) (*matrix.Dense, error) {
	e.clip(g)
	G, gp, gw := e.host(g), e.host(L.gpay), L.hf+4*L.h
	kernels.ParallelRows(e.rows(), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := gp[i*gw : (i+1)*gw]
			for k := range L.h {
				gk := row[k*L.f : (k+1)*L.f]
				if L.concat {
					copy(gk, G[i*L.dout+k*L.f:i*L.dout+(k+1)*L.f])
				} else {
					copy(gk, G[i*L.dout:(i+1)*L.dout])
					kernels.Scale(gk, 1/float32(L.h))
				}
				ik, seg := i*L.h+k, i*L.hf+k*L.f
				row[L.hf+k], row[L.hf+L.h+k], row[L.hf+2*L.h+k] = L.el[ik], L.m[ik], L.s[ik]
				delta := dot(gk, L.o[seg:seg+L.f])
				row[L.hf+3*L.h+k] = delta
				L.dEl[ik] = 0
				if s := L.s[ik]; s > 0 { // the target side
					L.dEl[ik] = (dot(gk, L.o2[seg:seg+L.f]) - delta*L.c[ik]) / s
				}
			}
		}
	})
	e.be.Upload(L.gpay)
	// The neighbour side, as each target's rows arrive.
	own := e.host(L.fwd.block(e.be, e.rank)) // this rank's rows as the targets used them
	e.be.Zero(L.dU)
	clear(L.dEr)
	dU := e.host(L.dU)
	err := e.communicate(L.grad, epoch, &ownRows{rows: L.gpay}, nil, func(j int) error {
		if blk := L.grad.blocks[j]; blk.NNZ() > 0 {
			L.neighbourSide(e, blk, e.host(L.grad.block(e.be, j)), j, own, dU)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	L.scoreGradients(e, own, dU)
	e.be.Upload(L.dU)
	if L.first {
		return nil, e.input.MulT(L.dW, L.dU)
	}
	if err := e.be.GEMMTN(L.dW, L.in, L.dU); err != nil {
		return nil, err
	}
	return L.dIn, e.be.GEMMNT(L.dIn, L.dU, e.m.W[L.l])
}

// neighbourSide adds, for this rank's rows r, Σ_i d α G_i into ∂U_r and
// Σ_i ∂s_ir into ∂er_r over the targets i of root j's block (src: their
// gradient rows; own: this rank's [U | er] as the targets used them).
func (L *gatLayer) neighbourSide(e *Engine, blk *matrix.CSR, src []float32, j int, own, dU []float32) {
	kernels.GATNeighbour(L.block(e, blk, src, j), own, dU, L.dEr)
}

// scoreGradients carries ∂el and ∂er into ∂U and the attention vectors:
// el_i = a_l·U_i on the fresh rows, er_r = a_r·U_r on the rows as sent.
func (L *gatLayer) scoreGradients(e *Engine, own, dU []float32) {
	al, ar, u := e.m.AttL[L.l].Data, e.m.AttR[L.l].Data, e.host(L.u)
	dal, dar := e.host(L.dAl), e.host(L.dAr)
	clear(dal)
	clear(dar)
	w := L.hf + L.h
	for r := range e.rows() {
		for k := range L.h {
			gl, gr := L.dEl[r*L.h+k], L.dEr[r*L.h+k]
			lo, hi := k*L.f, (k+1)*L.f
			du := dU[r*L.hf+lo : r*L.hf+hi]
			axpy(du, gl, al[lo:hi])
			axpy(du, gr, ar[lo:hi])
			axpy(dal[lo:hi], gl, u[r*L.hf+lo:r*L.hf+hi])
			axpy(dar[lo:hi], gr, own[r*w+lo:r*w+hi])
		}
	}
	e.be.Upload(L.dAl)
	e.be.Upload(L.dAr)
}

// attDropout is the attention dropout probability.
func (e *Engine) attDropout() float64 {
	if e.cfg.Model.AttDropout < 0 {
		return e.cfg.Model.Dropout
	}
	return e.cfg.Model.AttDropout
}

func dot(a, b []float32) float32 {
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

func axpy(y []float32, a float32, x []float32) {
	for i, v := range x {
		y[i] += a * v
	}
}

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
// The neighbour side needs each target's [G_i, el_i, lse_i, δ_i] (lse =
// m + ln s, so α_ij = e^(LeakyReLU(s_ij) − lse_i)) and j's [U_j | er_j] as
// the targets used it. With the sparse exchange the targets' owner forms
// it against its copy of j's rows and sends j's owner the sums over its
// targets, ∂U_j and ∂er_j (reduce.go). Otherwise (dense broadcasts,
// gradients that may be stale, cluster batches, deltas) the gradient rows
// travel through the gradient cache over the same blocks (Â is symmetric:
// the targets that read row j are j's neighbours), and j's owner
// recomputes α_ij from them against the copy of its own rows that the
// targets used.

import (
	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
)

type gatLayer struct {
	conv
	first    bool
	h, f, hf int  // heads, features per head, h·f
	concat   bool // hidden layer: heads side by side; last: their mean
	att      kernels.Attention
	in       *matrix.Dense
	u, dU    *matrix.Dense // U = H̃W and its gradient, rows × hf
	pay      *matrix.Dense // [U | er] per row: the forward rows that travel
	gpay     *matrix.Dense // [G | el | lse | δ] per row: the targets' gradient rows (broadcast: what travels)
	st       kernels.GATState
	dEl, dEr *matrix.Dense // rows × h
	dAl, dAr *matrix.Dense
	dIn      *matrix.Dense
	refU     *matrix.Dense // variation-gap: the noise-free U and its rows
	refPay   *matrix.Dense
	attKey   uint64 // this epoch's attention-dropout key (0: none)
	attKeep  float32
	attP     float64 // the attention dropout probability
	seed     uint64  // keys the attention dropout, with the epoch and layer
	// me is this rank; ids[j] root j's node ids as the attention reads
	// them and offsets[j] its first node (ids[j] nil: they count on from
	// there). They key the attention dropout.
	me      int
	ids     [][]int64
	offsets []int64
	// neighbours adds the neighbour side of every target into dU and dEr,
	// chosen once: broadcasting the gradient rows, or reducing the sums
	// (reduce.go; red).
	neighbours func(s layerSite, epoch int, own *matrix.Dense) error
	red        *reduction
	// nbrT and nbrOwn are the neighbour side's blocks where the sums are
	// reduced: every peer's block transposed (rows: the peer's rows,
	// columns: this rank's targets) and this rank's own (Â is symmetric).
	// The restricted last layer keeps only its training targets' columns
	// (output.go).
	nbrT   []*matrix.CSR
	nbrOwn *matrix.CSR
}

func (L *gatLayer) kind() string {
	if L.red != nil {
		return "gat (send [HW | a_r·HW], reduce [∂HW | ∂er])"
	}
	return "gat (send [HW | a_r·HW] and [G | el | lse | δ])"
}

// transform computes U = H̃·W, H̃ = dropout(in) (layer 1: the input
// operand under the mask); clean computes it without dropout, leaving the
// layer's H̃ alone.
func (L *gatLayer) transform(s layerSite, u, in *matrix.Dense, mask matrix.Mask, clean bool) error {
	w := s.weights(L.l).W
	switch {
	case L.first && clean:
		return s.sampleOperand().Mul(u, w)
	case L.first:
		x := s.operand()
		x.SetDropout(mask)
		return x.Mul(u, w)
	case clean:
		return s.backend().GEMM(u, in, w, false)
	}
	be := s.backend()
	be.Dropout(mask, L.in, in)
	return be.GEMM(u, L.in, w, false)
}

func (L *gatLayer) forward(s layerSite, p pass, in act) (act, error) {
	mask := s.mask(p.epoch, L.l, p.train)
	if err := L.transform(s, L.u, in.h, mask, false); err != nil {
		return act{}, err
	}
	w := s.weights(L.l)
	L.att.GATPayload(L.pay, L.st.El, L.u, w.AttL, w.AttR, L.h)
	var ref *matrix.Dense
	if p.shadow {
		var err error
		if ref, err = L.driftRef(s, in, mask); err != nil {
			return act{}, err
		}
	}
	L.attKey, L.attKeep = 0, 1
	if p.train && L.attP > 0 {
		L.attKey, L.attKeep = wire.Seed(L.seed^0x6a7, uint64(p.epoch)<<8|uint64(L.l)), float32(1-L.attP)
	}
	st := L.st
	if !p.train { // the target side's sums serve a backward only
		st.O2, st.C = nil, nil
	}
	L.att.GATStart(st)
	c := L.cacheFor(p)
	err := s.communicate(c, p.epoch, &ownRows{rows: L.pay}, ref, func(j int) error {
		if c.blocks[j].NNZ() > 0 {
			L.att.GATAttend(L.block(c.blocks[j], j), s.ownBlock(c, j, L.pay), st)
		}
		return nil
	})
	if err != nil {
		return act{}, err
	}
	L.att.GATFinish(L.z, st, L.h, L.concat)
	return act{h: L.z}, nil
}

// driftRef is the payload of the noise-free rows at the drift sample,
// what variation-gap measures this layer's drift on.
func (L *gatLayer) driftRef(s layerSite, in act, mask matrix.Mask) (*matrix.Dense, error) {
	s.sampleBuf(&L.refU, L.hf)
	s.sampleBuf(&L.refPay, L.hf+L.h)
	var x *matrix.Dense
	if !L.first {
		var err error
		if x, err = s.sampled(in, &L.sampIn); err != nil {
			return nil, err
		}
	}
	if err := L.transform(s, L.refU, x, mask, true); err != nil {
		return nil, err
	}
	w := s.weights(L.l)
	L.att.GATPayload(L.refPay, nil, L.refU, w.AttL, w.AttR, L.h)
	return L.refPay, nil
}

// block is root j's block of this layer's attention, with the ids that key
// dropout.
func (L *gatLayer) block(blk *matrix.CSR, j int) *kernels.GATBlock {
	return L.blockOf(blk, L.ids[L.me], L.offsets[L.me], L.ids[j], L.offsets[j])
}

// blockOf is a block of this epoch's attention whose rows and columns
// have the given node ids (nil: numbered from row0, col0).
func (L *gatLayer) blockOf(blk *matrix.CSR, rowIDs []int64, row0 int64, colIDs []int64, col0 int64) *kernels.GATBlock {
	return &kernels.GATBlock{A: blk, H: L.h, F: L.f, Key: L.attKey, Keep: L.attKeep,
		RowIDs: rowIDs, RowID0: row0, ColIDs: colIDs, ColID0: col0}
}

func (L *gatLayer) backward(s layerSite, epoch int, g *matrix.Dense) (*matrix.Dense, error) {
	s.clip(g)
	// The target side, from the forward's sums; the rows that travel.
	L.att.GATGradRows(L.gpay, L.dEl, L.dEr, g, L.st, L.h, L.concat)
	own, be, w := s.ownBlock(L.fwd, L.me, L.pay), s.backend(), s.weights(L.l)
	be.Zero(L.dU)
	if err := L.neighbours(s, epoch, own); err != nil {
		return nil, err
	}
	L.att.GATScoreGrads(L.dU, L.dAl, L.dAr, L.dEl, L.dEr, L.u, own, w.AttL, w.AttR, L.h)
	if L.first {
		return nil, s.operand().MulT(L.dW, L.dU)
	}
	if err := be.GEMMTN(L.dW, L.in, L.dU); err != nil {
		return nil, err
	}
	return L.dIn, be.GEMMNT(L.dIn, L.dU, w.W)
}

// broadcastGradients is the neighbour side as each target's gradient rows
// arrive, against this rank's rows as the targets used them (own).
func (L *gatLayer) broadcastGradients(s layerSite, epoch int, own *matrix.Dense) error {
	return s.communicate(L.grad, epoch, &ownRows{rows: L.gpay}, nil, func(j int) error {
		if blk := L.grad.blocks[j]; blk.NNZ() > 0 {
			L.att.GATNeighbour(L.block(blk, j), s.ownBlock(L.grad, j, L.gpay), own, L.dU, L.dEr)
		}
		return nil
	})
}

// reduceGradients forms each peer's neighbour side here, from this rank's
// targets' exact gradient rows and the peer's rows as this rank used them
// (its forward slot), and sends the sums (reduce.go); its own block's
// meanwhile.
func (L *gatLayer) reduceGradients(s layerSite, epoch int, own *matrix.Dense) error {
	be := s.backend()
	return s.reduce(L.red, epoch, []*matrix.Dense{L.dU, L.dEr}, func(j int, out []*matrix.Dense) error {
		if blk := L.nbrT[j]; blk.NNZ() > 0 { // rows: j's; columns: this rank's targets
			b := L.blockOf(blk, L.ids[j], L.offsets[j], L.ids[L.me], L.offsets[L.me])
			L.att.GATNeighbour(b, L.gpay, L.fwd.block(be, j), out[0], out[1])
		}
		return nil
	}, func() error {
		if blk := L.nbrOwn; blk.NNZ() > 0 { // Â is symmetric
			L.att.GATNeighbour(L.block(blk, L.me), L.gpay, own, L.dU, L.dEr)
		}
		return nil
	})
}

func (L *gatLayer) reduced() *reduction { return L.red }

var _ restricter = (*gatLayer)(nil) // memory.go counts its blocks through it

// restrictedBytes is what the restricted last layer's neighbour blocks
// add: the full ones are the view's and blockT (every peer's block
// transposed), counted there.
func (L *gatLayer) restrictedBytes(blockT []*matrix.CSR) int64 {
	var n int64
	for j, b := range L.nbrT {
		if b != nil && b != blockT[j] {
			n += b.Bytes()
		}
	}
	if L.nbrOwn != nil && L.nbrOwn != L.fwd.full[L.me] {
		n += L.nbrOwn.Bytes()
	}
	return n
}

// hostAttention is the CPU's attention on host copies of the engine's
// matrices, for a backend without its own. The layer's state (GATState,
// ∂el, ∂er) is then host memory and never moves; the model's attention
// vectors are read from the host, where the optimizer keeps them.
type hostAttention struct{ be kernels.Backend }

func (h hostAttention) down(ds ...*matrix.Dense) {
	for _, d := range ds {
		h.be.Download(d)
	}
}

func (h hostAttention) up(ds ...*matrix.Dense) {
	for _, d := range ds {
		h.be.Upload(d)
	}
}

func (h hostAttention) GATPayload(pay, el, u, al, ar *matrix.Dense, heads int) {
	h.down(u)
	kernels.CPU{}.GATPayload(pay, el, u, al, ar, heads)
	h.up(pay)
}

func (h hostAttention) GATStart(st kernels.GATState) { kernels.CPU{}.GATStart(st) }

func (h hostAttention) GATAttend(b *kernels.GATBlock, src *matrix.Dense, st kernels.GATState) {
	h.down(src)
	kernels.CPU{}.GATAttend(b, src, st)
}

func (h hostAttention) GATFinish(z *matrix.Dense, st kernels.GATState, heads int, concat bool) {
	kernels.CPU{}.GATFinish(z, st, heads, concat)
	h.up(z)
}

func (h hostAttention) GATGradRows(gpay, dEl, dEr, g *matrix.Dense, st kernels.GATState, heads int, concat bool) {
	h.down(g)
	kernels.CPU{}.GATGradRows(gpay, dEl, dEr, g, st, heads, concat)
	h.up(gpay)
}

func (h hostAttention) GATNeighbour(b *kernels.GATBlock, src, own, dU, dEr *matrix.Dense) {
	h.down(src, own, dU)
	kernels.CPU{}.GATNeighbour(b, src, own, dU, dEr)
	h.up(dU)
}

func (h hostAttention) GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar *matrix.Dense, heads int) {
	h.down(dU, u, own)
	kernels.CPU{}.GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar, heads)
	h.up(dU, dAl, dAr)
}

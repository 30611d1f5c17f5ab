//go:build cuda

package cuda

// #include "driver.h"
import "C"

import (
	"sancus/kernels"
	"sancus/kernels/matrix"
)

// GAT's attention on the device (kernels.Attention): the layer's softmax
// state, payload and gradient rows stay there, and only the attention
// vectors' gradients come back with the weights'. A module without the
// kernels (an older PTX) runs the CPU's on host copies of the same
// matrices.

// hasGAT reports whether the module holds every attention kernel.
func (b *Backend) hasGAT() bool {
	for k := C.int(C.SCG_GAT_PAYLOAD); k <= C.SCG_GAT_SCORE_VEC; k++ {
		if !b.has(k) {
			return false
		}
	}
	return true
}

// opt is an optional output: 0 where the matrix is nil.
func (b *Backend) opt(d *matrix.Dense) C.scg_ptr {
	if d == nil {
		return 0
	}
	return b.out(d)
}

// gatBlock is a block's pattern and dropout ids on the device, or false
// (with the backend's error set) where its shapes do not fit src, whose
// rows are w floats wide, and a state of rows rows.
func (b *Backend) gatBlock(gb *kernels.GATBlock, src *matrix.Dense, w, rows int) (C.scg_gat_block, bool) {
	a := gb.A
	if src.Rows < a.Cols || src.Cols != w || rows < a.Rows {
		b.fail("gat block %dx%d (%d heads of %d): source rows %dx%d, want %d wide; state rows %d",
			a.Rows, a.Cols, gb.H, gb.F, src.Rows, src.Cols, w, rows)
		return C.scg_gat_block{}, false
	}
	d := b.csr(a)
	return C.scg_gat_block{rowptr: d.rowptr.p, col: d.col.p, rowids: b.idsOf(gb.RowIDs), colids: b.idsOf(gb.ColIDs),
		rows: C.longlong(a.Rows), row0: C.longlong(gb.RowID0), col0: C.longlong(gb.ColID0),
		h: C.int(gb.H), f: C.int(gb.F), key: C.ulonglong(gb.Key), keep: C.float(gb.Keep)}, true
}

func (b *Backend) GATPayload(pay, el, u, al, ar *matrix.Dense, h int) {
	if !b.gat {
		b.onHost(func() { kernels.CPU{}.GATPayload(pay, el, u, al, ar, h) }, []*matrix.Dense{u}, []*matrix.Dense{pay, el})
		return
	}
	b.ok(C.scg_gat_payload(b.g, b.in(u), b.in(al), b.in(ar), b.out(pay), b.opt(el), C.longlong(u.Rows), C.int(h),
		C.int(u.Cols/h)), "gat payload")
}

func stateOf(st kernels.GATState) []*matrix.Dense {
	return []*matrix.Dense{st.El, st.M, st.S, st.O, st.O2, st.C}
}

func (b *Backend) GATStart(st kernels.GATState) {
	if !b.gat {
		b.onHost(func() { kernels.CPU{}.GATStart(st) }, nil, stateOf(st))
		return
	}
	b.ok(C.scg_gat_start(b.g, b.out(st.M), b.out(st.S), b.opt(st.C), b.out(st.O), b.opt(st.O2), C.longlong(st.M.Rows),
		C.int(st.M.Cols), C.int(st.O.Cols)), "gat start")
}

func (b *Backend) GATAttend(gb *kernels.GATBlock, src *matrix.Dense, st kernels.GATState) {
	if !b.gat {
		b.onHost(func() { kernels.CPU{}.GATAttend(gb, src, st) }, []*matrix.Dense{src}, stateOf(st))
		return
	}
	blk, ok := b.gatBlock(gb, src, gb.H*gb.F+gb.H, st.M.Rows)
	if !ok {
		return
	}
	b.ok(C.scg_gat_attend(b.g, &blk, b.in(src), b.in(st.El), b.out(st.M), b.out(st.S), b.out(st.O), b.opt(st.O2),
		b.opt(st.C)), "gat attend")
}

func (b *Backend) GATFinish(z *matrix.Dense, st kernels.GATState, h int, concat bool) {
	if !b.gat {
		b.onHost(func() { kernels.CPU{}.GATFinish(z, st, h, concat) }, stateOf(st), []*matrix.Dense{z, st.O, st.O2, st.C}) // the CPU clears rows no block reached
		return
	}
	b.ok(C.scg_gat_finish(b.g, b.out(st.O), b.in(st.S), b.out(z), C.longlong(z.Rows), C.int(h), C.int(st.O.Cols/h),
		cbool(concat)), "gat finish")
}

func (b *Backend) GATGradRows(gpay, dEl, dEr, g *matrix.Dense, st kernels.GATState, h int, concat bool) {
	if !b.gat {
		b.onHost(func() { kernels.CPU{}.GATGradRows(gpay, dEl, dEr, g, st, h, concat) },
			append(stateOf(st), g), []*matrix.Dense{gpay, dEl, dEr})
		return
	}
	b.Zero(dEr)
	b.ok(C.scg_gat_grad_rows(b.g, b.out(gpay), b.out(dEl), b.in(g), b.in(st.El), b.in(st.M), b.in(st.S), b.in(st.O),
		b.in(st.O2), b.in(st.C), C.longlong(g.Rows), C.int(h), C.int(st.O.Cols/h), C.int(g.Cols), cbool(concat)),
		"gat gradient rows")
}

func (b *Backend) GATNeighbour(gb *kernels.GATBlock, src, own, dU, dEr *matrix.Dense) {
	if !b.gat {
		b.onHost(func() { kernels.CPU{}.GATNeighbour(gb, src, own, dU, dEr) }, []*matrix.Dense{src, own},
			[]*matrix.Dense{dU, dEr})
		return
	}
	hf := gb.H * gb.F
	if own.Cols != hf+gb.H || own.Rows < gb.A.Rows {
		b.fail("gat neighbour side: own rows %dx%d for a block of %d rows, %d heads of %d", own.Rows, own.Cols,
			gb.A.Rows, gb.H, gb.F)
		return
	}
	blk, ok := b.gatBlock(gb, src, hf+3*gb.H, dU.Rows)
	if !ok {
		return
	}
	b.ok(C.scg_gat_neighbour(b.g, &blk, b.in(src), b.in(own), b.out(dU), b.out(dEr)), "gat neighbour side")
}

func (b *Backend) GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar *matrix.Dense, h int) {
	if !b.gat {
		b.onHost(func() { kernels.CPU{}.GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar, h) },
			[]*matrix.Dense{dEl, dEr, u, own}, []*matrix.Dense{dU, dAl, dAr})
		return
	}
	if u.Rows == 0 {
		b.Zero(dAl)
		b.Zero(dAr)
		return
	}
	chunks := (u.Rows + tnChunk - 1) / tnChunk
	p := b.grow(&b.partial, 2*chunks*u.Cols*4)
	b.ok(C.scg_gat_score_grads(b.g, b.out(dU), b.in(dEl), b.in(dEr), b.in(u), b.in(own), b.in(al), b.in(ar),
		C.longlong(u.Rows), C.int(h), C.int(u.Cols/h), tnChunk, C.int(chunks), p.p, b.out(dAl), b.out(dAr)),
		"gat score gradients")
}

package kernels

/*
#cgo LDFLAGS: -lm
#include "cpu.h"
*/
import "C"

import (
	"math"
	"unsafe"

	"sancus/kernels/matrix"
)

// GATBlock is one column block of a GAT layer's attention: its pattern,
// heads H of F features, and the node ids that key attention dropout — of
// the block's rows (RowIDs, nil: RowID0 + r) and columns (ColIDs, nil:
// ColID0 + c). Key 0 means no dropout; Keep is the kept fraction.
// src/train/gat.go holds the math.
type GATBlock struct {
	A              *matrix.CSR
	H, F           int
	Key            uint64
	Keep           float32
	RowIDs, ColIDs []int64
	RowID0, ColID0 int64
}

// GATState is a GAT layer's forward state over its rows: the target
// scores El = a_l·U, the running maxima M and sums S of each head's softmax
// (rows × H), the outputs O (rows × H·F) and, in a training forward, the
// sums the backward's target side reads, O2 (rows × H·F) and C (rows × H)
// (nil: not kept).
type GATState struct {
	El, M, S, O, O2, C *matrix.Dense
}

// Attention is what a backend may add: GAT's attention where the matrices
// live. Find it with AttentionOf; without it, the engine runs the CPU's on
// host copies. In every call the layer has H heads of F features (its
// block's, or h and f).
type Attention interface {
	// GATPayload writes the rows [U_i | a_r·U_i] of pay (heads of f =
	// u.Cols/h features) and, with el (nil: not), el_i = a_l·U_i.
	GATPayload(pay, el, u, al, ar *matrix.Dense, h int)
	// GATStart empties st's softmax and outputs before the first block.
	GATStart(st GATState)
	// GATAttend folds block b of source rows src ([U | er] per row) into
	// st.
	GATAttend(b *GATBlock, src *matrix.Dense, st GATState)
	// GATFinish writes z: each head's output over its sum, side by side
	// (concat) or their mean.
	GATFinish(z *matrix.Dense, st GATState, h int, concat bool)
	// GATGradRows writes the gradient rows [G | el | lse | δ] of gpay
	// (lse = m + ln s: a coefficient is e^(score − lse))
	// from the output's gradient g and the target side ∂el into dEl, and
	// empties dEr for the neighbour side.
	GATGradRows(gpay, dEl, dEr, g *matrix.Dense, st GATState, h int, concat bool)
	// GATNeighbour adds, for the block's rows as neighbours (own: their
	// [U | er] as the targets used them), the targets' (src: gradient
	// rows) shares into dU and dEr.
	GATNeighbour(b *GATBlock, src, own, dU, dEr *matrix.Dense)
	// GATScoreGrads carries ∂el and ∂er into dU and writes the attention
	// vectors' gradients dAl = Σ ∂el·U, dAr = Σ ∂er·own's U.
	GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar *matrix.Dense, h int)
}

// AttentionOf returns be's attention, if it has it (through Timed too).
func AttentionOf(be Backend) (Attention, bool) { return optional[Attention](be) }

func i64p(s []int64) *C.int64_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&s[0]))
}

// run calls f on row ranges of the block split by nonzeros.
func (b *GATBlock) run(f func(rp *C.int64_t, cp *C.int32_t, lo, hi int)) {
	if b.A.NNZ() == 0 {
		return
	}
	rp := (*C.int64_t)(unsafe.Pointer(&b.A.RowPtr[0]))
	cp := (*C.int32_t)(unsafe.Pointer(&b.A.ColIdx[0]))
	byNonzeros(b.A.RowPtr, func(lo, hi int) { f(rp, cp, lo, hi) })
}

func dataOf(d *matrix.Dense) []float32 {
	if d == nil {
		return nil
	}
	return d.Data
}

func (CPU) GATPayload(pay, el, u, al, ar *matrix.Dense, h int) {
	ParallelRows(pay.Rows, func(lo, hi int) {
		C.sc_gat_pay_rows(f32p(pay.Data), f32p(dataOf(el)), f32p(u.Data), f32p(al.Data), f32p(ar.Data), C.int64_t(h), C.int64_t(u.Cols/h),
			C.int64_t(lo), C.int64_t(hi))
	})
}

// GATStart empties the state over the kernel threads: a hidden layer's
// outputs are a row's 2·h·f floats, larger than the scores the attention
// reads. Where the attend starts each row's outputs itself (startsRows),
// it leaves them, and GATFinish clears the rows no block reached.
func (CPU) GATStart(st GATState) {
	inf := float32(math.Inf(-1))
	inPieces(len(st.M.Data), 1<<14, func(lo, hi int) {
		m, s := st.M.Data[lo:hi], st.S.Data[lo:hi]
		for i := range m {
			m[i], s[i] = inf, 0
		}
	})
	if startsRows(st) {
		return
	}
	Zero(st.O.Data)
	Zero(dataOf(st.O2))
	Zero(dataOf(st.C))
}

// startsRows reports whether the attend starts a row's outputs at its
// first edges (sc_gat_starts_rows).
func startsRows(st GATState) bool {
	h := st.M.Cols
	return C.sc_gat_starts_rows(C.int64_t(h), C.int64_t(st.O.Cols/h)) != 0
}

func (CPU) GATAttend(b *GATBlock, src *matrix.Dense, st GATState) {
	b.run(func(rp *C.int64_t, cp *C.int32_t, lo, hi int) {
		C.sc_gat_attend(rp, cp, f32p(src.Data), C.int64_t(b.H), C.int64_t(b.F), f32p(st.El.Data), f32p(st.M.Data), f32p(st.S.Data), f32p(st.O.Data),
			f32p(dataOf(st.O2)), f32p(dataOf(st.C)), C.int64_t(lo), C.int64_t(hi), C.uint64_t(b.Key), C.float(b.Keep),
			i64p(b.RowIDs), C.int64_t(b.RowID0), i64p(b.ColIDs), C.int64_t(b.ColID0))
	})
}

func (CPU) GATFinish(z *matrix.Dense, st GATState, h int, concat bool) {
	unstarted := startsRows(st) // rows no block reached hold the last pass's outputs
	ParallelRows(z.Rows, func(lo, hi int) {
		if unstarted {
			C.sc_gat_clear_unstarted(f32p(st.M.Data), f32p(st.O.Data), f32p(dataOf(st.O2)), f32p(dataOf(st.C)), C.int64_t(h), C.int64_t(st.O.Cols/h),
				C.int64_t(lo), C.int64_t(hi))
		}
		C.sc_gat_outputs(f32p(z.Data), C.int64_t(z.Cols), f32p(st.O.Data), f32p(st.S.Data), C.int64_t(h), C.int64_t(st.O.Cols/h),
			cBool(concat), C.int64_t(lo), C.int64_t(hi))
	})
}

func (CPU) GATGradRows(gpay, dEl, dEr, g *matrix.Dense, st GATState, h int, concat bool) {
	clear(dEr.Data)
	ParallelRows(g.Rows, func(lo, hi int) {
		C.sc_gat_gradient_rows(f32p(gpay.Data), f32p(dEl.Data), f32p(g.Data), C.int64_t(g.Cols), f32p(st.El.Data), f32p(st.M.Data),
			f32p(st.S.Data), f32p(st.O.Data), f32p(st.O2.Data), f32p(st.C.Data), C.int64_t(h), C.int64_t(st.O.Cols/h),
			cBool(concat), C.int64_t(lo), C.int64_t(hi))
	})
}

func (CPU) GATNeighbour(b *GATBlock, src, own, dU, dEr *matrix.Dense) {
	b.run(func(rp *C.int64_t, cp *C.int32_t, lo, hi int) {
		C.sc_gat_neighbour(rp, cp, f32p(src.Data), C.int64_t(b.H), C.int64_t(b.F), f32p(own.Data), f32p(dU.Data), f32p(dEr.Data),
			C.int64_t(lo), C.int64_t(hi), C.uint64_t(b.Key), C.float(b.Keep), i64p(b.RowIDs), C.int64_t(b.RowID0), i64p(b.ColIDs), C.int64_t(b.ColID0))
	})
}

func (CPU) GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar *matrix.Dense, h int) {
	hf := u.Cols
	sums := make([]float32, 2*hf)
	sumChunks(sums, u.Rows, func(r0, r1 int, part []float32) {
		C.sc_gat_score_grads(f32p(dU.Data), f32p(dEl.Data), f32p(dEr.Data), f32p(u.Data), f32p(own.Data), C.int64_t(own.Cols),
			f32p(al.Data), f32p(ar.Data), C.int64_t(h), C.int64_t(hf/h), C.int64_t(r0), C.int64_t(r1), f32p(part))
	})
	copy(dAl.Data, sums[:hf])
	copy(dAr.Data, sums[hf:])
}

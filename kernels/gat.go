package kernels

/*
#cgo LDFLAGS: -lm
#include "cpu.h"
*/
import "C"

import (
	"unsafe"

	"sancus/kernels/matrix"
)

// GATBlock is one column block of a GAT layer's attention: its pattern,
// the rows of the root it multiplies (Src), heads H of F features, and
// the node ids that key attention dropout — of the block's rows (RowIDs,
// nil: RowID0 + r) and columns (ColIDs, nil: ColID0 + c). Key 0 means no
// dropout; Keep is the kept fraction. src/train/gat.go holds the math.
type GATBlock struct {
	A              *matrix.CSR
	Src            []float32
	H, F           int
	Key            uint64
	Keep           float32
	RowIDs, ColIDs []int64
	RowID0, ColID0 int64
}

func i64p(s []int64) *C.int64_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&s[0]))
}

func (b *GATBlock) run(f func(rp *C.int64_t, cp *C.int32_t, lo, hi int)) {
	if b.A.NNZ() == 0 {
		return
	}
	rp := (*C.int64_t)(unsafe.Pointer(&b.A.RowPtr[0]))
	cp := (*C.int32_t)(unsafe.Pointer(&b.A.ColIdx[0]))
	forRanges(nnzCuts(b.A.RowPtr, threads), func(lo, hi int) { f(rp, cp, lo, hi) })
}

// GATAttend folds the block into the targets' running softmax (m, s) and
// outputs o, given their scores el. With o2 and c (nil: not kept) it also
// sums the slope-weighted outputs and coefficients the backward's target
// side reads.
func GATAttend(b *GATBlock, el, m, s, o, o2, c []float32) {
	b.run(func(rp *C.int64_t, cp *C.int32_t, lo, hi int) {
		C.sc_gat_attend(rp, cp, f32p(b.Src), C.int64_t(b.H), C.int64_t(b.F), f32p(el), f32p(m), f32p(s), f32p(o), f32p(o2), f32p(c),
			C.int64_t(lo), C.int64_t(hi), C.uint64_t(b.Key), C.float(b.Keep), i64p(b.RowIDs), C.int64_t(b.RowID0), i64p(b.ColIDs), C.int64_t(b.ColID0))
	})
}

// GATNeighbour adds, for the block's rows as neighbours (own: their rows
// as the targets used them), the targets' (Src: gradient rows) shares
// into dU and dEr. Dropout keys take the block's columns as targets.
func GATNeighbour(b *GATBlock, own, dU, dEr []float32) {
	b.run(func(rp *C.int64_t, cp *C.int32_t, lo, hi int) {
		C.sc_gat_neighbour(rp, cp, f32p(b.Src), C.int64_t(b.H), C.int64_t(b.F), f32p(own), f32p(dU), f32p(dEr),
			C.int64_t(lo), C.int64_t(hi), C.uint64_t(b.Key), C.float(b.Keep), i64p(b.RowIDs), C.int64_t(b.RowID0), i64p(b.ColIDs), C.int64_t(b.ColID0))
	})
}

package kernels

/*
#include "cpu.h"
*/
import "C"

import (
	"unsafe"

	"sancus/kernels/matrix"
)

// The masks are defined in matrix (Mask.Keep); dropout.c draws the same
// values in its hot loops.

func idPtr(m matrix.Mask) *C.int64_t {
	if len(m.IDs) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&m.IDs[0]))
}

// Dropout sets dst = src ⊙ mask / (1−p). dst may alias src.
func Dropout(m matrix.Mask, dst, src *matrix.Dense) {
	if m.P <= 0 {
		if dst != src {
			copy(dst.Data, src.Data)
		}
		return
	}
	sp, dp := f32p(src.Data), f32p(dst.Data)
	forRanges(evenCuts(src.Rows, threads, 1024), func(lo, hi int) {
		C.sc_dropout_dense(sp, dp, C.int64_t(src.Cols), C.int64_t(lo), C.int64_t(hi),
			C.uint64_t(m.Seed), C.uint64_t(m.Stream), C.int64_t(m.Row0), idPtr(m), C.uint32_t(m.Threshold()), C.float(m.KeepScale()))
	})
}

// DropoutCSR writes into vals the values of a with the mask applied (same
// sparsity structure; dropped entries become 0).
func DropoutCSR(m matrix.Mask, vals []float32, a *matrix.CSR) {
	if m.P <= 0 {
		copy(vals, a.Val)
		return
	}
	if a.NNZ() == 0 {
		return
	}
	rp := (*C.int64_t)(unsafe.Pointer(&a.RowPtr[0]))
	cp := (*C.int32_t)(unsafe.Pointer(&a.ColIdx[0]))
	forRanges(nnzCuts(a.RowPtr, threads), func(lo, hi int) {
		C.sc_dropout_csr(rp, cp, f32p(a.Val), f32p(vals), C.int64_t(lo), C.int64_t(hi),
			C.uint64_t(m.Seed), C.uint64_t(m.Stream), C.int64_t(m.Row0), idPtr(m), C.uint32_t(m.Threshold()), C.float(m.KeepScale()))
	})
}

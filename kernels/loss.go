package kernels

/*
#include "cpu.h"
*/
import "C"

import (
	"unsafe"

	"sancus/kernels/matrix"
)

// lossChunk is the fixed number of listed rows whose losses are summed
// together: chunks are added in order, so the sum does not depend on the
// thread count.
const lossChunk = 512

// SoftmaxCE computes the summed cross-entropy over rows listed in mask and
// writes into grad (same shape as logits) d(loss)/d(logits) scaled by
// 1/norm; rows outside the mask get zero gradient.
func SoftmaxCE(logits *matrix.Dense, labels []int32, mask []int32, norm float64, grad *matrix.Dense) (lossSum float64) {
	if grad != nil {
		Zero(grad.Data)
	}
	return SoftmaxCERows(logits, labels, mask, norm, grad)
}

// SoftmaxCERows is SoftmaxCE that writes grad at the listed rows only: its
// other rows are left as they are (a caller that writes no other row keeps
// them zero without a pass over them). grad may be logits itself: a row is
// read whole before its gradient is written (the rows listed are distinct).
func SoftmaxCERows(logits *matrix.Dense, labels []int32, mask []int32, norm float64, grad *matrix.Dense) (lossSum float64) {
	var gp *C.float
	if grad != nil {
		gp = f32p(grad.Data)
	}
	if len(mask) == 0 || logits.Cols == 0 {
		return 0
	}
	zp, lp := f32p(logits.Data), (*C.int32_t)(unsafe.Pointer(&labels[0]))
	rp := (*C.int32_t)(unsafe.Pointer(&mask[0]))
	chunks := (len(mask) + lossChunk - 1) / lossChunk
	part := make([]float64, chunks)
	inPieces(chunks, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			part[ch] = float64(C.sc_softmax_ce(zp, C.int64_t(logits.Cols), lp, rp, C.int64_t(ch*lossChunk),
				C.int64_t(min((ch+1)*lossChunk, len(mask))), C.double(norm), gp))
		}
	})
	for _, v := range part {
		lossSum += v
	}
	return lossSum
}

// expNonPositive sets y = e^x for x ≤ 0 with the loss kernel's exponential
// (so it can be checked against float64 on its own).
func expNonPositive(x, y []float32) {
	if n := min(len(x), len(y)); n > 0 {
		C.sc_exp(f32p(x), f32p(y), C.int64_t(n))
	}
}

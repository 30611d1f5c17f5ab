package kernels

/*
#include "cpu.h"
*/
import "C"
import "sancus/kernels/matrix"

// GEMM computes C = A·B (or C += A·B): A m×k, B k×n, C m×n. It is tuned for
// the GCN shape: many rows, narrow k and n, so B stays in L1.
func GEMM(c, a, b *matrix.Dense, accumulate bool) error {
	if err := CheckMul("gemm", c, a.Rows, a.Cols, b); err != nil {
		return err
	}
	if a.Rows == 0 || c.Cols == 0 {
		return nil
	}
	if a.Cols == 0 {
		if !accumulate {
			c.Zero()
		}
		return nil
	}
	acc := C.int(0)
	if accumulate {
		acc = 1
	}
	k, n := C.int64_t(a.Cols), C.int64_t(b.Cols)
	forRanges(evenCuts(a.Rows, threads, 256), func(lo, hi int) {
		C.sc_gemm_nn(f32p(a.Data), f32p(b.Data), f32p(c.Data), k, n, C.int64_t(lo), C.int64_t(hi), acc)
	})
	return nil
}

// GEMMNT computes C = A·Bᵀ: A m×n, B k×n, C m×k.
func GEMMNT(c, a, b *matrix.Dense) error {
	if err := CheckMulNT("gemm A·Bᵀ", c, a, b); err != nil {
		return err
	}
	return GEMM(c, a, b.T(), false)
}

// tnChunk is the fixed row-chunk size of the Aᵀ·B reduction. Partial sums are
// per chunk, not per thread, and are added in chunk order, so the result is
// the same for any thread count.
const tnChunk = 4096

// GEMMTN computes C = Aᵀ·B: A m×k, B m×n, C k×n (a weight gradient).
func GEMMTN(c, a, b *matrix.Dense) error {
	if err := CheckMulTN("gemm Aᵀ·B", c, a.Rows, a.Cols, b); err != nil {
		return err
	}
	c.Zero()
	m := a.Rows
	if m == 0 || len(c.Data) == 0 {
		return nil
	}
	k, n := C.int64_t(a.Cols), C.int64_t(b.Cols)
	chunks := (m + tnChunk - 1) / tnChunk
	partial := make([]float32, chunks*len(c.Data))
	forRanges(evenCuts(chunks, threads, 1), func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			r0, r1 := ch*tnChunk, min((ch+1)*tnChunk, m)
			C.sc_gemm_tn(f32p(a.Data), f32p(b.Data), f32p(partial[ch*len(c.Data):]), k, n, C.int64_t(r0), C.int64_t(r1))
		}
	})
	for ch := 0; ch < chunks; ch++ {
		p := partial[ch*len(c.Data) : (ch+1)*len(c.Data)]
		for i, v := range p {
			c.Data[i] += v
		}
	}
	return nil
}

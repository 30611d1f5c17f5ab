package kernels

/*
#cgo CFLAGS: -O3 -std=gnu11
#include "cpu.h"
*/
import "C"

import (
	"sancus/kernels/matrix"
	"unsafe"
)

func f32p(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

func i32p(s []int32) *C.int32_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&s[0]))
}

// SpMM computes C = A·B, or C += A·B when accumulate is set.
// A is m×k matrix.CSR, B is k×n dense, C is m×n dense.
func SpMM(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, accumulate bool) error {
	if err := CheckMul("spmm", c, a.Rows, a.Cols, b); err != nil {
		return err
	}
	if a.Rows == 0 || b.Cols == 0 {
		return nil
	}
	acc := C.int(0)
	if accumulate {
		acc = 1
	}
	var colp *C.int32_t
	var valp *C.float
	if len(a.ColIdx) > 0 {
		colp = (*C.int32_t)(unsafe.Pointer(&a.ColIdx[0]))
		valp = f32p(a.Val)
	}
	rowp := (*C.int64_t)(unsafe.Pointer(&a.RowPtr[0]))
	bp := f32p(b.Data)
	cp := f32p(c.Data)
	n := C.int64_t(b.Cols)
	forRanges(nnzCuts(a.RowPtr, threads), func(lo, hi int) {
		C.sc_spmm(rowp, colp, valp, bp, cp, n, C.int64_t(lo), C.int64_t(hi), acc)
	})
	return nil
}

// SIMD reports which instruction set the kernels use on this CPU.
func SIMD() string { return simdNames[C.sc_simd_level()] }

var simdNames = []string{"baseline", "avx2+fma", "avx512"}

// LimitSIMD makes the kernels use at most the named instruction set
// (baseline, avx2+fma, avx512), so tests and benchmarks can run every
// level on one CPU. It is process-wide and cannot be raised again.
func LimitSIMD(name string) {
	for l, n := range simdNames {
		if n == name {
			C.sc_limit_simd(C.int(l))
		}
	}
}

// Triad computes a = b + s·c (the STREAM triad) over all threads; it is the
// memory-bandwidth yardstick the SpMM benchmark is compared against.
func Triad(a, b, c []float32, s float32) {
	forRanges(evenCuts(len(a), threads, 1<<14), func(lo, hi int) {
		C.sc_triad(f32p(a), f32p(b), f32p(c), C.float(s), C.int64_t(lo), C.int64_t(hi))
	})
}

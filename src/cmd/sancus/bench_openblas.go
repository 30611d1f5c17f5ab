//go:build openblas

package main

import (
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/kernels/openblas"
)

// baselineGEMM is OpenBLAS's sgemm, on as many threads as the kernels use:
// with -tags openblas (make bench), bench kernels sets it next to every
// GEMM it times.
func baselineGEMM() func(c, a, b *matrix.Dense, transA bool) error {
	openblas.SetThreads(kernels.Threads())
	return openblas.GEMM
}

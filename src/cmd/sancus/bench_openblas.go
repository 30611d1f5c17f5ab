//go:build openblas

package main

import (
	"sancus/kernels"
	"sancus/kernels/openblas"
)

// With -tags openblas (make bench), bench kernels sets OpenBLAS's sgemm
// next to every GEMM it times, on as many threads as the kernels use.
func init() {
	openblas.SetThreads(kernels.Threads())
	blasGEMM = openblas.GEMM
}

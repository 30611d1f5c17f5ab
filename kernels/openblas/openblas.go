//go:build openblas

// Package openblas calls the system OpenBLAS's sgemm: the baseline the
// GEMM benchmark measures sancus's kernels against (`make bench` builds
// with -tags openblas and installs Debian's libopenblas-dev). Training
// never uses it.
package openblas

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import (
	"fmt"

	"sancus/kernels/matrix"
)

// SetThreads sets OpenBLAS's thread count, to match the kernels'.
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// GEMM computes C = op(A)·B with OpenBLAS, op(A) = Aᵀ when transA.
func GEMM(c, a, b *matrix.Dense, transA bool) error {
	m, k := a.Rows, a.Cols
	ta := C.enum_CBLAS_TRANSPOSE(C.CblasNoTrans)
	if transA {
		m, k = k, m
		ta = C.CblasTrans
	}
	if k != b.Rows || c.Rows != m || c.Cols != b.Cols {
		return fmt.Errorf("openblas sgemm: shapes do not match")
	}
	if m == 0 || c.Cols == 0 || k == 0 {
		return nil
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, C.CblasNoTrans, C.blasint(m), C.blasint(c.Cols), C.blasint(k), 1,
		(*C.float)(&a.Data[0]), C.blasint(a.Cols), (*C.float)(&b.Data[0]), C.blasint(b.Cols), 0,
		(*C.float)(&c.Data[0]), C.blasint(c.Cols))
	return nil
}

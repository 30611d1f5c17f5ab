//go:build !openblas

package main

import "sancus/kernels/matrix"

// baselineGEMM is nil without -tags openblas: bench kernels then times
// sancus's GEMMs alone.
func baselineGEMM() func(c, a, b *matrix.Dense, transA bool) error { return nil }

//go:build openblas

package openblas

import (
	"math"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
)

// The baseline must compute the same product as the kernels it is
// compared with.
func TestAgreesWithKernels(t *testing.T) {
	a, b, g := matrix.NewDense(3000, 40), matrix.NewDense(40, 24), matrix.NewDense(3000, 24)
	for i := range a.Data {
		a.Data[i] = float32(math.Sin(float64(i)))
	}
	for i := range b.Data {
		b.Data[i] = float32(math.Cos(float64(i)))
	}
	for i := range g.Data {
		g.Data[i] = float32(math.Sin(float64(3 * i)))
	}
	for _, tr := range []bool{false, true} {
		var mine, theirs *matrix.Dense
		if tr {
			mine, theirs = matrix.NewDense(40, 24), matrix.NewDense(40, 24)
			kernels.GEMMTN(mine, a, g)
			if err := GEMM(theirs, a, g, true); err != nil {
				t.Fatal(err)
			}
		} else {
			mine, theirs = matrix.NewDense(3000, 24), matrix.NewDense(3000, 24)
			kernels.GEMM(mine, a, b, false)
			if err := GEMM(theirs, a, b, false); err != nil {
				t.Fatal(err)
			}
		}
		for i := range mine.Data {
			if d := math.Abs(float64(mine.Data[i] - theirs.Data[i])); d > 1e-3 {
				t.Fatalf("transA=%v element %d: %g against OpenBLAS %g", tr, i, mine.Data[i], theirs.Data[i])
			}
		}
	}
}

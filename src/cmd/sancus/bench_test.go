package main

import (
	"math/rand/v2"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
)

// TestFoldColumnsGathersTheSameRows: the kernel benchmark's in-L2 product
// is the real one with H folded, so Â·H over the folded columns equals Â·H
// over an H whose row c is the folded H's row c mod rows, bit for bit.
func TestFoldColumnsGathersTheSameRows(t *testing.T) {
	const n, cols, rows, w = 60, 500, 16, 32
	r := rand.New(rand.NewPCG(1, 2))
	a := &matrix.CSR{Rows: n, Cols: cols, RowPtr: make([]int64, n+1)}
	for i := 0; i < n; i++ {
		for c := 0; c < cols; c++ {
			if r.IntN(20) == 0 {
				a.ColIdx = append(a.ColIdx, int32(c))
				a.Val = append(a.Val, r.Float32())
			}
		}
		a.RowPtr[i+1] = int64(len(a.ColIdx))
	}
	small, big := matrix.NewDense(rows, w), matrix.NewDense(cols, w)
	for i := range small.Data {
		small.Data[i] = r.Float32() - 0.5
	}
	for c := 0; c < cols; c++ {
		copy(big.Row(c), small.Row(c%rows))
	}
	want, got := matrix.NewDense(n, w), matrix.NewDense(n, w)
	if err := kernels.SpMM(want, a, big, false); err != nil {
		t.Fatal(err)
	}
	f := foldColumns(a, rows)
	if f.Cols != rows || f.NNZ() != a.NNZ() {
		t.Fatalf("folded: %d columns, %d nonzeros; want %d, %d", f.Cols, f.NNZ(), rows, a.NNZ())
	}
	if err := kernels.SpMM(got, f, small, false); err != nil {
		t.Fatal(err)
	}
	for i := range want.Data {
		if got.Data[i] != want.Data[i] {
			t.Fatalf("element %d: folded %v, real %v", i, got.Data[i], want.Data[i])
		}
	}
}

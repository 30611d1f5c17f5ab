package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"sancus/kernels/matrix"
)

// TestSpMMColumns: a product over B a range of its rows at a time leaves C
// as one product over all of B, bit for bit, for every row, a list of
// rows and occupied rows, summing or not, at any range size and thread
// count.
func TestSpMMColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	defer SetThreads(Threads())
	for _, sh := range []struct {
		rows, k, n int
		density    float64
	}{{300, 120, 16, 0.05}, {3000, 1000, 16, 0.01}, {300, 120, 7, 0.05}, {2000, 500, 33, 0.01}, {500, 300, 256, 0.02}, {200, 50, 47, 0.2}} {
		a := randCSR(r, sh.rows, sh.k, sh.density)
		if !SortedColumns(a) {
			t.Fatal("randCSR's rows are not sorted")
		}
		b := randDense(r, sh.k, sh.n)
		o := Occupied(a)
		for _, th := range []int{1, 2} {
			SetThreads(th)
			for _, way := range []string{"every row", "rows", "occupied"} {
				for _, acc := range []bool{false, true} {
					for _, step := range []int{1, 7, 64, sh.k} {
						name := fmt.Sprintf("%v %d threads %s accumulate %v step %d", sh, th, way, acc, step)
						init := randDense(r, sh.rows, sh.n)
						want, got := init.Clone(), init.Clone()
						var rows []int32
						var ptr []int64
						var err error
						switch way {
						case "every row":
							err = SpMM(want, a, b, acc)
						case "rows":
							rows = o.Rows
							err = SpMMRows(want, a, b, rows, acc)
						default:
							rows, ptr = o.Rows, o.Ptr
							err = SpMMOccupied(want, a, b, o, acc)
						}
						if err != nil {
							t.Fatal(err)
						}
						cur := make([]int64, rowsIn(rows, a.Rows))
						for lo := 0; lo < sh.k; lo += step {
							hi := min(sh.k, lo+step)
							part := &matrix.Dense{Rows: hi - lo, Cols: sh.n, Data: b.Data[lo*sh.n : hi*sh.n]}
							cr := ColumnRange{Lo: lo, Hi: hi, Rows: rows, Ptr: ptr, Cursor: cur, First: lo == 0}
							if err := SpMMColumns(got, a, part, cr, acc || lo > 0); err != nil {
								t.Fatal(err)
							}
						}
						for i := range want.Data {
							if got.Data[i] != want.Data[i] {
								t.Fatalf("%s: element %d is %g, SpMM's %g", name, i, got.Data[i], want.Data[i])
							}
						}
					}
				}
			}
		}
	}
}

package kernels

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sancus/collectives/wire"
	"sancus/kernels/matrix"
	"slices"
	"strings"
	"testing"
)

func randDense(r *rand.Rand, rows, cols int) *matrix.Dense {
	d := matrix.NewDense(rows, cols)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64())
	}
	return d
}

func randCSR(r *rand.Rand, rows, cols int, density float64) *matrix.CSR {
	a := &matrix.CSR{Rows: rows, Cols: cols, RowPtr: make([]int64, rows+1)}
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			if r.Float64() < density {
				a.ColIdx = append(a.ColIdx, int32(j))
				a.Val = append(a.Val, float32(r.NormFloat64()))
			}
		}
		a.RowPtr[i+1] = int64(len(a.ColIdx))
	}
	return a
}

func naiveMul(a, b *matrix.Dense) *matrix.Dense {
	c := matrix.NewDense(a.Rows, b.Cols)
	for i := 0; i < a.Rows; i++ {
		for j := 0; j < b.Cols; j++ {
			var s float64
			for k := 0; k < a.Cols; k++ {
				s += float64(a.Data[i*a.Cols+k]) * float64(b.Data[k*b.Cols+j])
			}
			c.Data[i*c.Cols+j] = float32(s)
		}
	}
	return c
}

func assertClose(t *testing.T, what string, got, want *matrix.Dense) {
	t.Helper()
	assertSum(t, what, got, want, 0)
}

// assertSum checks got against a float64 reference whose every element
// sums terms products of N(0,1) values: float32 sums of that many terms
// may drift by about terms·ε from it even when exact cancellation leaves
// a small result.
func assertSum(t *testing.T, what string, got, want *matrix.Dense, terms int) {
	t.Helper()
	if got.Rows != want.Rows || got.Cols != want.Cols {
		t.Fatalf("%s: shape %dx%d, want %dx%d", what, got.Rows, got.Cols, want.Rows, want.Cols)
	}
	for i := range want.Data {
		// Written as not within, so that a NaN fails (equal infinities pass).
		if d := math.Abs(float64(got.Data[i] - want.Data[i])); got.Data[i] != want.Data[i] && !(d <= 1e-4*(1+math.Abs(float64(want.Data[i])))+6e-8*float64(terms)) {
			t.Fatalf("%s: element %d = %g, want %g", what, i, got.Data[i], want.Data[i])
		}
	}
}

// Widths cover one, two and four vectors of 16, leftover columns, and
// widths with no full vector.
var widths = []int{1, 7, 16, 33, 64, 80, 128}

func TestSpMMMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// B of 120 rows fits L1 at every width (spmm's narrow path at 16); of
	// 1,000, not.
	type shape struct{ n, k int }
	shapes := []shape{{16, 1000}}
	for _, n := range widths {
		shapes = append(shapes, shape{n, 120})
	}
	for _, sh := range shapes {
		n := sh.n
		for _, th := range []int{1, 2, 3} {
			SetThreads(th)
			a := randCSR(r, 300, sh.k, 0.05)
			b := randDense(r, sh.k, n)
			c := matrix.NewDense(300, n)
			if err := SpMM(c, a, b, false); err != nil {
				t.Fatal(err)
			}
			want := naiveMul(a.ToDense(), b)
			assertClose(t, "spmm", c, want)
			if err := SpMM(c, a, b, true); err != nil {
				t.Fatal(err)
			}
			for i := range want.Data {
				want.Data[i] *= 2
			}
			assertClose(t, "spmm accumulate", c, want)

			// At a row list (ascending, as the engine's, and not): the
			// listed rows as SpMM forms them, bit for bit; the rest untouched.
			for _, at := range [][]int32{{0, 5, 6, 100, 299}, {250, 3, 17}} {
				got := matrix.NewDense(300, n)
				fill(got, -7)
				if err := SpMM(c, a, b, false); err != nil {
					t.Fatal(err)
				}
				for pass, acc := range []bool{false, true} {
					if err := SpMMRows(got, a, b, at, acc); err != nil {
						t.Fatal(err)
					}
					if acc {
						if err := SpMM(c, a, b, true); err != nil {
							t.Fatal(err)
						}
					}
					checkAtRows(t, fmt.Sprintf("spmm at rows %v (pass %d)", at, pass), got, c, at)
				}
			}
		}
	}
	if err := SpMMRows(matrix.NewDense(3, 2), randCSR(r, 3, 4, 0.5), matrix.NewDense(4, 2), []int32{3}, false); err == nil || !strings.Contains(err.Error(), "entry 0 is 3") {
		t.Fatalf("a row past the end: %v", err)
	}
	SetThreads(2)
}

// TestSpMMOccupied: a product at a sparse block's occupied rows, through
// their own pointers, writes what SpMMRows writes at them, bit for bit
// (B in L1 and not, widths with and without whole vectors, lists long
// enough to split), and refuses pointers that fall or run past the end.
func TestSpMMOccupied(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	defer SetThreads(Threads())
	for _, sh := range []struct{ rows, k, n int }{{300, 120, 16}, {300, 1000, 16}, {3000, 1000, 16}, {300, 120, 7}, {2000, 500, 33}} {
		for _, th := range []int{1, 2} {
			SetThreads(th)
			a := randCSR(r, sh.rows, sh.k, 0.0015)
			b := randDense(r, sh.k, sh.n)
			o := Occupied(a)
			for _, acc := range []bool{false, true} {
				want, got := randDense(r, sh.rows, sh.n), matrix.NewDense(sh.rows, sh.n)
				copy(got.Data, want.Data)
				if err := SpMMRows(want, a, b, o.Rows, acc); err != nil {
					t.Fatal(err)
				}
				if err := SpMMOccupied(got, a, b, o, acc); err != nil {
					t.Fatal(err)
				}
				for i := range want.Data {
					if got.Data[i] != want.Data[i] {
						t.Fatalf("%v, %d threads, accumulate %v: element %d is %g, SpMMRows's %g", sh, th, acc, i, got.Data[i], want.Data[i])
					}
				}
			}
		}
	}
	a := &matrix.CSR{Rows: 3, Cols: 2, RowPtr: []int64{0, 1, 1, 2}, ColIdx: []int32{0, 1}, Val: []float32{1, 2}}
	c, b := matrix.NewDense(3, 2), matrix.NewDense(2, 2)
	for _, o := range []OccupiedRows{{Rows: []int32{0, 2}, Ptr: []int64{0, 1, 3}}, {Rows: []int32{0, 2}, Ptr: []int64{1, 0, 2}}, {Rows: []int32{0, 2}, Ptr: []int64{0, 1}}} {
		if err := SpMMOccupied(c, a, b, o, true); err == nil {
			t.Fatalf("pointers %v for rows %v taken", o.Ptr, o.Rows)
		}
	}
}

func TestGEMMShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	// Inner widths: narrow, several scratch blocks, one row per block; then
	// a narrow B with k a multiple of 64, whose Aᵀ·B is formed transposed.
	ks := []int{20, 130, 20, 600, 7, 20, 33, 128, 256, 64}
	for i, n := range append(widths, 16, 32, 8) {
		k := ks[i]
		rows := min(5000, 2_000_000/k)
		a := randDense(r, rows, k)
		b := randDense(r, k, n)
		c := matrix.NewDense(rows, n)
		if err := GEMM(c, a, b, false); err != nil {
			t.Fatal(err)
		}
		assertSum(t, "A·B", c, naiveMul(a, b), k)

		g := randDense(r, rows, n)
		ct := matrix.NewDense(k, n)
		if err := GEMMTN(ct, a, g); err != nil {
			t.Fatal(err)
		}
		assertSum(t, "Aᵀ·B", ct, naiveMul(a.T(), g), rows)

		w := randDense(r, k, n)
		cn := matrix.NewDense(rows, k)
		if err := GEMMNT(cn, g, w); err != nil {
			t.Fatal(err)
		}
		assertSum(t, "A·Bᵀ", cn, naiveMul(g, w.T()), n)
	}
}

func fill(d *matrix.Dense, v float32) {
	for i := range d.Data {
		d.Data[i] = v
	}
}

// checkAtRows fails unless got's listed rows equal full's and its other
// rows still hold the -7 they were filled with.
func checkAtRows(t *testing.T, what string, got, full *matrix.Dense, rows []int32) {
	t.Helper()
	listed := make([]bool, got.Rows)
	for _, r := range rows {
		listed[r] = true
	}
	for i := range got.Rows {
		for j := range got.Cols {
			v, want := got.Data[i*got.Cols+j], float32(-7)
			if listed[i] {
				want = full.Data[i*full.Cols+j]
			}
			if v != want {
				t.Fatalf("%s: row %d (listed %v) column %d is %g, want %g", what, i, listed[i], j, v, want)
			}
		}
	}
}

// TestGEMMRowsBiasReLUKeepsDenormals: the fused bias and ReLU run in IEEE
// mode, as AddBiasReLU does, though the product flushes denormals.
func TestGEMMRowsBiasReLUKeepsDenormals(t *testing.T) {
	a := &matrix.Dense{Rows: 1, Cols: 1, Data: []float32{2e-38}} // normal, as is a·1
	b := &matrix.Dense{Rows: 1, Cols: 1, Data: []float32{1}}
	bias := []float32{-1.5e-38}
	want, got := matrix.NewDense(1, 1), matrix.NewDense(1, 1)
	if err := GEMM(want, a, b, false); err != nil {
		t.Fatal(err)
	}
	AddBiasReLU(want, bias, true)
	if want.Data[0] == 0 {
		t.Fatal("the reference flushed the denormal sum: this test checks nothing")
	}
	if err := GEMMRowsDropBiasReLU(got, a, b, matrix.Mask{}, bias, []int32{0}); err != nil {
		t.Fatal(err)
	}
	if math.Float32bits(got.Data[0]) != math.Float32bits(want.Data[0]) {
		t.Fatalf("fused bias and ReLU gave %g, AddBiasReLU %g", got.Data[0], want.Data[0])
	}
	if err := GEMMRowsDropBiasReLU(got, a, b, matrix.Mask{}, []float32{1, 2}, []int32{0}); err == nil {
		t.Fatal("a bias of the wrong length was accepted")
	}
}

// TestGEMMRows: the products at a row list form each listed row exactly as
// the full products do (dropout drawn inside them too) and leave the other
// rows alone; Aᵀ·B over the list is the full Aᵀ·B with every other row zero.
func TestGEMMRows(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	// k = 40000: one row per scratch block. The lists: a third of the
	// rows unsorted, as training rows may be; or (runs) every row but one
	// in order, whose blocks of consecutive rows are read where they lie.
	for _, c := range []struct {
		k    int
		runs bool
	}{{7, false}, {16, false}, {130, false}, {40000, false}, {16, true}, {64, true}, {130, true}} {
		k := c.k
		n, rows := 16, min(3000, 400_000/k)
		a, b, g, w := randDense(r, rows, k), randDense(r, k, n), randDense(r, rows, n), randDense(r, k, n)
		list := r.Perm(rows)[:rows/3]
		if c.runs {
			list = nil
			for i := range rows {
				if i != rows/2 {
					list = append(list, i)
				}
			}
		}
		at := make([]int32, len(list))
		listed := make([]bool, rows)
		for i, x := range list {
			at[i], listed[x] = int32(x), true
		}
		check := func(what string, got, full *matrix.Dense) {
			t.Helper()
			checkAtRows(t, fmt.Sprintf("k=%d runs=%v %s", k, c.runs, what), got, full, at)
		}
		plain, gotPlain := matrix.NewDense(rows, n), matrix.NewDense(rows, n)
		fill(gotPlain, -7)
		if err := GEMM(plain, a, b, false); err != nil {
			t.Fatal(err)
		}
		if err := GEMMRows(gotPlain, a, b, at); err != nil {
			t.Fatal(err)
		}
		check("A·B", gotPlain, plain)
		mask := matrix.Mask{P: 0.5, Seed: 3, Stream: 4, Row0: 100}
		full, got := matrix.NewDense(rows, n), matrix.NewDense(rows, n)
		fill(got, -7)
		if err := GEMMDrop(full, a, b, mask, false); err != nil {
			t.Fatal(err)
		}
		if err := GEMMRowsDrop(got, a, b, mask, at); err != nil {
			t.Fatal(err)
		}
		check("M(A)·B", got, full)
		fullNT, gotNT := matrix.NewDense(rows, k), matrix.NewDense(rows, k)
		fill(gotNT, -7)
		if err := GEMMNT(fullNT, g, w); err != nil {
			t.Fatal(err)
		}
		if err := GEMMNTRows(gotNT, g, w, at); err != nil {
			t.Fatal(err)
		}
		check("A·Bᵀ", gotNT, fullNT)

		zeroed := matrix.NewDense(rows, n)
		for _, x := range list {
			copy(zeroed.Data[x*n:(x+1)*n], g.Data[x*n:(x+1)*n])
		}
		tn := matrix.NewDense(k, n)
		if err := GEMMTNRows(tn, a, g, at); err != nil {
			t.Fatal(err)
		}
		assertSum(t, "Aᵀ·B at rows", tn, naiveMul(a.T(), zeroed), len(list))
		dropped := matrix.NewDense(rows, k)
		Dropout(mask, dropped, a)
		if err := GEMMTNRowsDrop(tn, a, g, mask, at); err != nil {
			t.Fatal(err)
		}
		assertSum(t, "M(A)ᵀ·B at rows", tn, naiveMul(dropped.T(), zeroed), len(list))

		// The bias, column sums and the loss at the listed rows.
		bias := randDense(r, 1, n).Data
		for _, relu := range []bool{false, true} {
			fullB, gotB := matrix.NewDense(rows, n), matrix.NewDense(rows, n)
			copy(fullB.Data, g.Data)
			for i := range list {
				copy(gotB.Row(list[i]), g.Row(list[i]))
			}
			for i := range rows {
				if !listed[i] {
					fill(&matrix.Dense{Rows: 1, Cols: n, Data: gotB.Row(i)}, -7)
				}
			}
			AddBiasReLU(fullB, bias, relu)
			if err := AddBiasReLURows(gotB, bias, relu, at); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("bias (relu %v)", relu), gotB, fullB)
		}
		fused, fullF := matrix.NewDense(rows, n), full.Clone()
		fill(fused, -7)
		AddBiasReLU(fullF, bias, true)
		if err := GEMMRowsDropBiasReLU(fused, a, b, mask, bias, at); err != nil {
			t.Fatal(err)
		}
		check("ReLU(M(A)·B + bias)", fused, fullF)
		// With the next layer's mask, the same rows, and each also dropped
		// into a second matrix as DropoutRows would drop it (by ids here).
		then := matrix.Mask{P: 0.4, Seed: 5, Stream: 6, IDs: make([]int64, rows)}
		for i := range then.IDs {
			then.IDs[i] = int64(3*i + 1)
		}
		fusedThen, droppedThen, wantDropped := matrix.NewDense(rows, n), matrix.NewDense(rows, n), matrix.NewDense(rows, n)
		fill(fusedThen, -7)
		fill(droppedThen, -7)
		if err := GEMMRowsDropBiasReLUThen(fusedThen, a, b, mask, bias, at, then, droppedThen); err != nil {
			t.Fatal(err)
		}
		check("ReLU(M(A)·B + bias), then dropped", fusedThen, fullF)
		Dropout(then, wantDropped, fullF)
		check("the next layer's dropped rows", droppedThen, wantDropped)
		if err := GEMMRowsDropBiasReLUThen(fusedThen, a, b, mask, bias, at, then, matrix.NewDense(rows, n+1)); err == nil {
			t.Fatal("a dropped copy of the wrong shape was accepted")
		}
		if err := GEMMRowsDropBiasReLUThen(fusedThen, a, b, mask, nil, at, then, droppedThen); err == nil {
			t.Fatal("a dropped copy without the bias and ReLU was accepted")
		}
		sums := make([]float32, n)
		if err := ColumnSumsRows(sums, g, at); err != nil {
			t.Fatal(err)
		}
		ones := matrix.NewDense(1, rows)
		fill(ones, 1)
		assertSum(t, "column sums at rows", &matrix.Dense{Rows: 1, Cols: n, Data: sums}, naiveMul(ones, zeroed), len(list))
		labels := make([]int32, rows)
		for i := range labels {
			labels[i] = int32(r.IntN(n))
		}
		fullG, gotG := matrix.NewDense(rows, n), matrix.NewDense(rows, n)
		fill(gotG, -7)
		lossFull := SoftmaxCE(g, labels, at, 3, fullG)
		if loss := SoftmaxCERows(g, labels, at, 3, gotG); loss != lossFull {
			t.Fatalf("k=%d loss at rows: %g, want %g", k, loss, lossFull)
		}
		check("loss gradient", gotG, fullG)
	}
	if err := GEMMRows(matrix.NewDense(4, 2), matrix.NewDense(4, 3), matrix.NewDense(3, 2), []int32{0, 4}); err == nil || !strings.Contains(err.Error(), "entry 1 is 4") {
		t.Fatalf("a row past the end: %v", err)
	}
	if err := AddBiasReLURows(matrix.NewDense(4, 2), make([]float32, 2), true, []int32{-1}); err == nil || !strings.Contains(err.Error(), "entry 0 is -1") {
		t.Fatalf("a negative row: %v", err)
	}
	if err := ColumnSumsRows(make([]float32, 2), matrix.NewDense(4, 2), []int32{1, 9}); err == nil || !strings.Contains(err.Error(), "entry 1 is 9") {
		t.Fatalf("a row past the end: %v", err)
	}
}

// TestGatherSum: the gathers alone sum the rows each row of A gathers, at
// the widths the kernel benchmark times, and a width the tiles do not fit
// is refused.
func TestGatherSum(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a := randCSR(r, 300, 200, 0.05)
	ones := &matrix.CSR{Rows: a.Rows, Cols: a.Cols, RowPtr: a.RowPtr, ColIdx: a.ColIdx, Val: make([]float32, len(a.Val))}
	for i := range ones.Val {
		ones.Val[i] = 1
	}
	for _, w := range []int{16, 64, 80, 128} {
		b, got := randDense(r, a.Cols, w), matrix.NewDense(a.Rows, w)
		fill(got, -7)
		if err := GatherSum(got, a, b); err != nil {
			t.Fatal(err)
		}
		assertClose(t, fmt.Sprintf("gather sum, width %d", w), got, naiveMul(ones.ToDense(), b))
	}
	if err := GatherSum(matrix.NewDense(300, 20), a, matrix.NewDense(200, 20)); err == nil {
		t.Fatal("width 20 was accepted")
	}
}

// TestRowOpsWithoutRows: to every row operation an empty list and a nil
// one are the same, no row: outputs stay as they were (sums over no row
// are zero), whatever the operation does with a full list.
func TestRowOpsWithoutRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	const rows, k, n = 40, 8, 5
	a, b, sp := randDense(r, rows, k), randDense(r, k, n), randCSR(r, rows, rows, 0.2)
	h, g := randDense(r, rows, n), randDense(r, rows, n)
	labels := make([]int32, rows)
	var ro RowOps = CPU{}
	for _, at := range [][]int32{nil, {}} {
		name := fmt.Sprintf("list %#v", at)
		untouched := func(what string, got *matrix.Dense, want float32) {
			t.Helper()
			for i, v := range got.Data {
				if v != want {
					t.Fatalf("%s: %s wrote entry %d (%v)", name, what, i, v)
				}
			}
		}
		out := matrix.NewDense(rows, n)
		for _, acc := range []bool{false, true} {
			fill(out, -7)
			if err := ro.SpMMRows(out, sp, h, at, acc); err != nil {
				t.Fatal(err)
			}
			untouched("SpMMRows", out, -7)
		}
		fill(out, -7)
		if err := ro.GEMMRows(out, a, b, at); err != nil {
			t.Fatal(err)
		}
		untouched("GEMMRows", out, -7)
		if err := ro.GEMMNTRows(out, a, b.T(), at); err != nil {
			t.Fatal(err)
		}
		untouched("GEMMNTRows", out, -7)
		if err := ro.AddBiasReLURows(out, make([]float32, n), true, at); err != nil {
			t.Fatal(err)
		}
		untouched("AddBiasReLURows", out, -7)
		if err := ro.DropoutRows(matrix.Mask{P: 0.5, Seed: 1}, out, h, at); err != nil {
			t.Fatal(err)
		}
		untouched("DropoutRows", out, -7)
		if loss := ro.LossGradRows(h.Clone(), labels, at, 1, out); loss != 0 {
			t.Fatalf("%s: the loss over no row is %v", name, loss)
		}
		untouched("LossGradRows", out, -7)
		tn := matrix.NewDense(k, n)
		fill(tn, -7)
		if err := ro.GEMMTNRows(tn, a, g, at); err != nil {
			t.Fatal(err)
		}
		untouched("GEMMTNRows (a sum over no row)", tn, 0)
		sums := &matrix.Dense{Rows: 1, Cols: n, Data: []float32{1, 2, 3, 4, 5}}
		if err := ro.ColumnSumsRows(sums.Data, g, at); err != nil {
			t.Fatal(err)
		}
		untouched("ColumnSumsRows (a sum over no row)", sums, 0)
		if err := ro.ZeroOtherRows(out, at); err != nil {
			t.Fatal(err)
		}
		untouched("ZeroOtherRows (every row is other)", out, 0)
	}
}

// TestFusedDropoutGEMM: dropout drawn inside the products equals dropout
// applied first, for masks by row offset and by gathered ids.
func TestFusedDropoutGEMM(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, k := range []int{7, 48, 128, 300, 33000} { // the last: one row per scratch block
		rows := min(3000, 1_000_000/k)
		a, b, g := randDense(r, rows, k), randDense(r, k, 16), randDense(r, rows, 16)
		if k > 1000 { // positive terms: float32 sums of 33000 stay within the test's tolerance
			for _, d := range []*matrix.Dense{a, b, g} {
				for i, v := range d.Data {
					d.Data[i] = float32(math.Abs(float64(v)))
				}
			}
		}
		ids := make([]int64, a.Rows)
		for i := range ids {
			ids[i] = int64(r.IntN(1 << 40))
		}
		for _, m := range []matrix.Mask{{P: 0.5, Seed: 3, Stream: 9, Row0: 77}, {P: 0.2, Seed: 4, Stream: 1, IDs: ids}} {
			dropped := matrix.NewDense(a.Rows, k)
			Dropout(m, dropped, a)
			c := matrix.NewDense(a.Rows, 16)
			if err := GEMMDrop(c, a, b, m, false); err != nil {
				t.Fatal(err)
			}
			assertSum(t, "M(A)·B", c, naiveMul(dropped, b), k)
			ct := matrix.NewDense(k, 16)
			if err := GEMMTNDrop(ct, a, g, m); err != nil {
				t.Fatal(err)
			}
			assertSum(t, "M(A)ᵀ·B", ct, naiveMul(dropped.T(), g), rows)
		}
	}
}

// TestDenormalsFlushed: products read denormal inputs as zero (a denormal
// operand costs an FMA a microcode assist), and leave the caller's
// floating-point mode as it was.
func TestDenormalsFlushed(t *testing.T) {
	runtime.LockOSThread() // one thread runs the kernels (inline) and the check after
	defer runtime.UnlockOSThread()
	defer SetThreads(Threads())
	SetThreads(1)
	a := randCSR(rand.New(rand.NewPCG(1, 2)), 50, 40, 0.3)
	b := matrix.NewDense(40, 16)
	for i := range b.Data {
		b.Data[i] = 1e-39
	}
	c := matrix.NewDense(50, 16)
	if err := SpMM(c, a, b, false); err != nil {
		t.Fatal(err)
	}
	d := matrix.NewDense(16, 16)
	if err := GEMMTN(d, b, b); err != nil {
		t.Fatal(err)
	}
	for i, v := range append(c.Data, d.Data...) {
		if v != 0 {
			t.Fatalf("element %d = %g from denormal inputs, want 0", i, v)
		}
	}
	if tiny/16 == 0 { // Go's own arithmetic on this thread still keeps denormals
		t.Fatal("the floating-point mode leaked out of the kernels")
	}
}

var tiny = float32(1e-38) // a variable, so tiny/16 is computed at run time

func TestGEMMTNIndependentOfThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a, g := randDense(r, 20000, 16), randDense(r, 20000, 8)
	sameForThreads(t, "M(A)ᵀ·G", func() *matrix.Dense {
		c := matrix.NewDense(16, 8)
		if err := GEMMTNDrop(c, a, g, matrix.Mask{P: 0.5, Seed: 1, Stream: 2}); err != nil {
			t.Fatal(err)
		}
		return c
	})
}

// sameForThreads runs f at 1, 2 and 5 kernel threads and fails unless the
// matrices it returns are bitwise the same.
func sameForThreads(t *testing.T, what string, f func() *matrix.Dense) {
	t.Helper()
	defer SetThreads(Threads())
	var ref *matrix.Dense
	for _, th := range []int{1, 2, 5} {
		SetThreads(th)
		c := f()
		if ref == nil {
			ref = c
			continue
		}
		for i := range c.Data {
			if c.Data[i] != ref.Data[i] {
				t.Fatalf("%s, threads=%d: element %d differs bitwise: %g vs %g", what, th, i, c.Data[i], ref.Data[i])
			}
		}
	}
}

// TestSpMMT: Aᵀ·B from A's rows equals the product through the dense
// transpose, at widths with and without whole vectors, with empty rows
// and columns, and bitwise the same for any thread count.
func TestSpMMT(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, sh := range []struct{ rows, cols, n int }{{9000, 40, 16}, {3000, 128, 7}, {50, 3, 1}, {4097, 64, 33}, {2000, 50, 32}, {2000, 50, 64}} {
		a, b := randCSR(r, sh.rows, sh.cols, 0.05), randDense(r, sh.rows, sh.n)
		want := naiveMul(a.ToDense().T(), b)
		what := fmt.Sprintf("%d×%d ᵀ· %d wide", sh.rows, sh.cols, sh.n)
		sameForThreads(t, what, func() *matrix.Dense {
			c := randDense(r, sh.cols, sh.n) // overwritten, not added to
			if err := SpMMT(c, a, b); err != nil {
				t.Fatal(err)
			}
			assertSum(t, what, c, want, sh.rows)
			return c
		})
	}
	if err := SpMMT(matrix.NewDense(3, 2), randCSR(r, 4, 3, 0.5), matrix.NewDense(5, 2)); err == nil {
		t.Fatal("SpMMT accepted 4 rows of A against 5 of B")
	}
}

func TestShapeErrors(t *testing.T) {
	if err := SpMM(matrix.NewDense(2, 2), randCSR(rand.New(rand.NewPCG(1, 1)), 2, 3, 0.5), matrix.NewDense(2, 2), false); err == nil {
		t.Fatal("SpMM accepted mismatched shapes")
	}
	if err := GEMM(matrix.NewDense(2, 2), matrix.NewDense(2, 3), matrix.NewDense(2, 2), false); err == nil {
		t.Fatal("GEMM accepted mismatched shapes")
	}
}

func TestOperandSparseAndDenseAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	a := randCSR(r, 500, 40, 0.1)
	sp := NewOperand(a)
	if !sp.IsSparse() {
		t.Fatal("10% dense matrix was expanded")
	}
	dn := NewDenseOperand(a.ToDense())
	w, g := randDense(r, 40, 16), randDense(r, 500, 16)
	m := matrix.Mask{P: 0.5, Seed: 9, Stream: 3, Row0: 100}
	for _, o := range []*Operand{sp, dn} {
		o.SetDropout(m)
	}
	c1, c2 := matrix.NewDense(500, 16), matrix.NewDense(500, 16)
	sp.Mul(c1, w)
	dn.Mul(c2, w)
	assertClose(t, "dropout O·W sparse vs dense", c1, c2)
	// MulAdd sums O·W into what C holds.
	for _, o := range []*Operand{sp, dn} {
		c := randDense(r, 500, 16)
		want := matrix.NewDense(500, 16)
		for i := range want.Data {
			want.Data[i] = c.Data[i] + c1.Data[i]
		}
		if err := o.MulAdd(c, w); err != nil {
			t.Fatal(err)
		}
		assertClose(t, fmt.Sprintf("O·W summed (sparse %v)", o.IsSparse()), c, want)
	}
	t1, t2 := matrix.NewDense(40, 16), matrix.NewDense(40, 16)
	sp.MulT(t1, g)
	dn.MulT(t2, g)
	assertClose(t, "dropout Oᵀ·G sparse vs dense", t1, t2)
	// A new mask must refresh the transposed values.
	for _, o := range []*Operand{sp, dn} {
		o.SetDropout(matrix.Mask{P: 0.5, Seed: 9, Stream: 4, Row0: 100})
	}
	sp.MulT(t1, g)
	dn.MulT(t2, g)
	assertClose(t, "second mask Oᵀ·G", t1, t2)

	// Features too wide for a partial per row chunk go through Oᵀ, whose
	// values each new mask refreshes.
	wide := randCSR(r, 300, directTN/16+5, 0.002)
	sp, dn = NewOperand(wide), NewDenseOperand(wide.ToDense())
	for _, stream := range []uint64{1, 2} {
		for _, o := range []*Operand{sp, dn} {
			o.SetDropout(matrix.Mask{P: 0.5, Seed: 9, Stream: stream})
		}
		t1, t2 = matrix.NewDense(wide.Cols, 16), matrix.NewDense(wide.Cols, 16)
		sp.MulT(t1, g.Prefix(300))
		dn.MulT(t2, g.Prefix(300))
		assertClose(t, fmt.Sprintf("wide Oᵀ·G, mask %d", stream), t1, t2)
	}
}

// TestDenseOperandReplaysItsForwardMask: a dense operand's weight gradient
// reads the mask its forward product recorded (keptBits) and gets what
// drawing it again gets, bit for bit, for every row list and width; it
// reads the record (spoiled bits change the result) only while every row
// it reads was drawn under the current mask, and draws otherwise.
func TestDenseOperandReplaysItsForwardMask(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	const n = 700
	var some, fewer []int32
	for i := range n {
		if i%3 != 0 {
			some = append(some, int32(i))
			if i%2 == 0 {
				fewer = append(fewer, int32(i))
			}
		}
	}
	bitsEqual := func(what string, got, want *matrix.Dense) {
		t.Helper()
		for i := range want.Data {
			if math.Float32bits(got.Data[i]) != math.Float32bits(want.Data[i]) {
				t.Fatalf("%s: value %d is %v, drawn again %v", what, i, got.Data[i], want.Data[i])
			}
		}
	}
	for _, k := range []int{32, 128, 160} {
		a := randDense(r, n, k)
		w, g := randDense(r, k, 16), randDense(r, n, 16)
		m := matrix.Mask{P: 0.4, Seed: 11, Stream: 2, Row0: 50}
		for _, c := range []struct {
			name     string
			fwd, bwd []int32 // nil: every row
			replayed bool
			newMask  bool    // a new mask between the two
			again    []int32 // a forward at these rows under the new mask
		}{
			{"all rows", nil, nil, true, false, nil},
			{"listed rows", some, some, true, false, nil},
			{"fewer rows back", some, fewer, true, false, nil},
			{"rows not drawn", fewer, some, false, false, nil},
			{"a new mask", nil, nil, false, true, nil},
			{"a new mask drawn at some rows, all back", nil, nil, false, true, some},
			{"a new mask drawn at some rows, those back", nil, some, true, true, some},
		} {
			o := NewDenseOperand(a)
			in := denseInput{o}
			o.SetDropout(m)
			z := matrix.NewDense(n, 16)
			if c.fwd == nil {
				o.Mul(z, w)
			} else {
				in.MulRows(z, w, c.fwd)
			}
			if c.newMask {
				m2 := m
				m2.Stream = 9
				o.SetDropout(m2)
				if c.again != nil {
					in.MulRows(z, w, c.again)
				}
			}
			want, got := matrix.NewDense(k, 16), matrix.NewDense(k, 16)
			back := func(dst *matrix.Dense) {
				if c.bwd == nil {
					o.MulT(dst, g)
				} else {
					in.MulTRows(dst, g, c.bwd)
				}
			}
			if c.bwd == nil {
				GEMMTNDrop(want, a, g, o.mask)
			} else {
				GEMMTNRowsDrop(want, a, g, o.mask, c.bwd)
			}
			back(got)
			what := fmt.Sprintf("k %d, %s", k, c.name)
			bitsEqual(what, got, want)
			// Spoil the record: a replay now reads other draws.
			for i := range o.kept.bits {
				o.kept.bits[i] ^= 0xa5
			}
			back(got)
			differs := false
			for i := range want.Data {
				differs = differs || got.Data[i] != want.Data[i]
			}
			if differs != c.replayed {
				t.Fatalf("%s: read the record %v, want %v", what, differs, c.replayed)
			}
		}
	}
	// Widths that are no multiple of 32 keep no record and still draw.
	o := NewDenseOperand(randDense(r, 40, 48))
	o.SetDropout(matrix.Mask{P: 0.5, Seed: 1})
	o.Mul(matrix.NewDense(40, 16), randDense(r, 48, 16))
	if o.kept != nil {
		t.Fatal("a 48-wide operand kept a record")
	}
}

func TestDropoutMaskIsPositional(t *testing.T) {
	// Rows 10..19 of a 20-row matrix masked with Row0=0 must equal a
	// 10-row block masked with Row0=10: masks do not depend on the split.
	r := rand.New(rand.NewPCG(1, 3))
	full := randDense(r, 20, 16)
	m := matrix.Mask{P: 0.3, Seed: 5, Stream: 2}
	out := matrix.NewDense(20, 16)
	Dropout(m, out, full)
	blk := full.RowBlock(10, 20).Clone()
	m.Row0 = 10
	Dropout(m, blk, blk)
	assertClose(t, "block mask", blk, out.RowBlock(10, 20))
	// A gathered block (rows 3, 17, 4) masked by explicit ids.
	gath := matrix.NewDense(3, 16)
	for i, r := range []int{3, 17, 4} {
		copy(gath.Row(i), full.Row(r))
	}
	m.Row0, m.IDs = 0, []int64{3, 17, 4}
	Dropout(m, gath, gath)
	for i, r := range []int{3, 17, 4} {
		for c := 0; c < 16; c++ {
			if gath.Row(i)[c] != out.Row(r)[c] {
				t.Fatalf("gathered row %d col %d: %g vs %g", r, c, gath.Row(i)[c], out.Row(r)[c])
			}
		}
	}
	kept := 0
	for _, v := range out.Data {
		if v != 0 {
			kept++
		}
	}
	if frac := float64(kept) / float64(len(out.Data)); frac < 0.55 || frac > 0.85 {
		t.Fatalf("kept fraction %.2f for p=0.3", frac)
	}
}

func TestDropoutReLUBackwardIsBoth(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	for _, shape := range [][2]int{{600, 16}, {600, 71}, {600, 128}, {9000, 16}} { // 9000 rows: three of ColumnSums' chunks
		rows, cols := shape[0], shape[1]
		for _, m := range []matrix.Mask{{}, {P: 0.5, Seed: 3, Stream: 9, Row0: 40}, {P: 0.2, Seed: 3, Stream: 9}} {
			g, h := randDense(r, rows, cols), randDense(r, rows, cols) // h: half of it ≤ 0
			if m.P == 0.2 {
				m.IDs = make([]int64, g.Rows)
				for i := range m.IDs {
					m.IDs[i] = int64(7 * i)
				}
			}
			want := g.Clone()
			Dropout(m, want, want)
			ReLUBackward(want, h)
			wantSums := make([]float32, cols)
			ColumnSums(wantSums, want)
			for _, withSums := range []bool{false, true} {
				got := g.Clone()
				var sums []float32
				if withSums {
					sums = make([]float32, cols)
					for j := range sums {
						sums[j] = float32(j) // overwritten, not added to
					}
				}
				DropoutReLUBackward(m, got, h, sums)
				// From the forward's dropped output M(ReLU(h)) instead of
				// h and the mask: the same, bit for bit.
				relu := h.Clone()
				for i, v := range relu.Data {
					relu.Data[i] = max(v, 0)
				}
				d := relu.Clone()
				Dropout(m, d, relu)
				fromD := g.Clone()
				var sumsD []float32
				if withSums {
					sumsD = make([]float32, cols)
				}
				if err := ReLUDroppedBackward(fromD, d, m.KeepScale(), sumsD); err != nil {
					t.Fatal(err)
				}
				for name, res := range map[string][]float32{"from h": got.Data, "from M(h)": fromD.Data} {
					for i, v := range res {
						if math.Float32bits(v) != math.Float32bits(want.Data[i]) {
							t.Fatalf("%d×%d p %g %s: element %d is %g, the two passes give %g", rows, cols, m.P, name, i, v, want.Data[i])
						}
					}
				}
				for name, res := range map[string][]float32{"from h": sums, "from M(h)": sumsD} {
					for j, v := range res {
						if math.Float32bits(v) != math.Float32bits(wantSums[j]) {
							t.Fatalf("%d×%d p %g %s: column sum %d is %g, ColumnSums gives %g", rows, cols, m.P, name, j, v, wantSums[j])
						}
					}
				}
			}
		}
	}
}

// TestDropoutRows: dropout at a row list writes those rows exactly as
// Dropout does (masks by row offset and by ids) and leaves the others.
func TestDropoutRows(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 2))
	src := randDense(r, 3000, 16)
	rows := []int32{2999, 5, 6, 7, 100, 2048, 0}
	for _, m := range []matrix.Mask{{P: 0.5, Seed: 2, Stream: 7, Row0: 300}, {P: 0.3, Seed: 2, Stream: 7, IDs: make([]int64, 3000)}, {}} {
		for i := range m.IDs {
			m.IDs[i] = int64(3*i + 1)
		}
		want := matrix.NewDense(3000, 16)
		Dropout(m, want, src)
		got := matrix.NewDense(3000, 16)
		fill(got, -7)
		if err := DropoutRows(m, got, src, rows); err != nil {
			t.Fatal(err)
		}
		checkAtRows(t, fmt.Sprintf("dropout at rows, p %g", m.P), got, want, rows)
		// Packed by the sender instead, over the kernel threads: the same rows.
		shuffled := make([]int32, 2500)
		for k, v := range r.Perm(3000)[:2500] {
			shuffled[k] = int32(v)
		}
		for _, list := range [][]int32{rows, shuffled} {
			packed := make([]float32, len(list)*16)
			if err := DropoutGather(m, bytesOf(packed), src.Data, 16, list); err != nil {
				t.Fatal(err)
			}
			for k, row := range list {
				if !slices.Equal(packed[k*16:(k+1)*16], want.Row(int(row))) {
					t.Fatalf("dropout gather, p %g: packed row %d is not row %d dropped", m.P, k, row)
				}
			}
		}
	}
	if err := DropoutRows(matrix.Mask{P: 0.5}, src, src, []int32{3000}); err == nil || !strings.Contains(err.Error(), "entry 0 is 3000") {
		t.Fatalf("a row past the end: %v", err)
	}
	if err := DropoutGather(matrix.Mask{P: 0.5}, make([]byte, 64), src.Data, 16, []int32{1, 2}); err == nil || !strings.Contains(err.Error(), "need 32 floats packed") {
		t.Fatalf("a short pack buffer: %v", err)
	}
}

func TestDropoutKernelsMatchKeep(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 9))
	d := randDense(r, 37, 71)
	a := randCSR(r, 37, 71, 0.3)
	m := matrix.Mask{P: 0.4, Seed: 11, Stream: 5, Row0: 1000}
	out := matrix.NewDense(37, 71)
	Dropout(m, out, d)
	vals := make([]float32, len(a.Val))
	DropoutCSR(m, vals, a)
	s := m.KeepScale()
	// Rows of every length around a vector's, and ranges ending anywhere
	// in one: each value written, from its own row's draws.
	for _, shape := range []struct {
		rows    int
		density float64
	}{{1, 0.9}, {3, 0.2}, {50, 0.13}, {200, 0.5}} {
		b := randCSR(r, shape.rows, 71, shape.density)
		got := make([]float32, len(b.Val))
		for i := range got {
			got[i] = float32(math.NaN())
		}
		DropoutCSR(m, got, b)
		for i := 0; i < b.Rows; i++ {
			for p := b.RowPtr[i]; p < b.RowPtr[i+1]; p++ {
				want := float32(0)
				if m.Keep(i, int(b.ColIdx[p])) {
					want = b.Val[p] * s
				}
				if got[p] != want {
					t.Fatalf("%d rows at %g: csr (%d,%d) = %g want %g", shape.rows, shape.density, i, b.ColIdx[p], got[p], want)
				}
			}
		}
	}
	for i := 0; i < 37; i++ {
		for c := 0; c < 71; c++ {
			want := float32(0)
			if m.Keep(i, c) {
				want = d.Data[i*71+c] * s
			}
			if out.Data[i*71+c] != want {
				t.Fatalf("dense (%d,%d) = %g want %g", i, c, out.Data[i*71+c], want)
			}
		}
		for p := a.RowPtr[i]; p < a.RowPtr[i+1]; p++ {
			want := float32(0)
			if m.Keep(i, int(a.ColIdx[p])) {
				want = a.Val[p] * s
			}
			if vals[p] != want {
				t.Fatalf("csr (%d,%d) = %g want %g", i, a.ColIdx[p], vals[p], want)
			}
		}
	}
}

func TestBiasReLUAndBackward(t *testing.T) {
	z := &matrix.Dense{Rows: 2, Cols: 3, Data: []float32{-1, 0.5, 2, 3, -4, 0}}
	AddBiasReLU(z, []float32{0.5, 0, -3}, true)
	want := []float32{0, 0.5, 0, 3.5, 0, 0}
	for i, v := range want {
		if z.Data[i] != v {
			t.Fatalf("bias+relu = %v, want %v", z.Data, want)
		}
	}
	g := &matrix.Dense{Rows: 2, Cols: 3, Data: []float32{1, 2, 3, 4, 5, 6}}
	ReLUBackward(g, z)
	wantG := []float32{0, 2, 0, 4, 0, 0}
	for i, v := range wantG {
		if g.Data[i] != v {
			t.Fatalf("relu backward = %v, want %v", g.Data, wantG)
		}
	}
}

func TestOpenBackend(t *testing.T) {
	b, err := Open(DeviceCPU, 0)
	if err != nil || b.Name() != "cpu" {
		t.Fatalf("default backend: %v %v", b, err)
	}
	if _, err := Open(DeviceCUDA, 0); err == nil || !strings.Contains(err.Error(), "make cuda") {
		if err == nil {
			t.Skip("this binary has the CUDA backend")
		}
		t.Fatalf("cuda in a CPU build: %v", err)
	}
	if _, err := Open(Device(9), 0); err == nil || !strings.Contains(err.Error(), "unknown device") {
		t.Fatalf("unknown backend: %v", err)
	}
}

// The C row codec writes the very bytes and values of the Go reference in
// collectives/wire, for every integer width, with and without adding, on
// widths that do and do not fill whole bytes and chunks; the owner's
// decoded copy equals a receiver's, and the error sums are the copy's.
func TestQuantizeMatchesWireReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, width := range []int{13, 16, 300} {
		rows := 3001
		x := make([]float32, rows*width)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Pow(10, float64(i%7-3)))
		}
		for i := 0; i < width; i++ { // a constant row, a zero row, signed zeros, and
			// rows of tiny values, whose offset or step is a step from zero
			x[5*width+i], x[6*width+i] = 0.375, 0
			x[7*width+i] = float32(math.Copysign(0, float64(i%3-1)))
			x[8*width+i] = -x[7*width+i]
			x[9*width+i], x[10*width+i] = -1e-41, float32(i+1)*1e-41
		}
		const key = 99
		hash := make([]uint64, rows)
		for i := range hash {
			hash[i] = wire.RowHash(uint64(i))
		}
		for _, bits := range []int{2, 4, 8} {
			rb := wire.RowBytes(bits, width)
			want, got := make([]byte, rows*rb), make([]byte, rows*rb)
			wire.Encode(want, x, width, bits, func(r int) uint64 { return wire.SeedOf(key, hash[r]) })
			for _, add := range []bool{false, true} {
				base := make([]float32, len(x))
				for i := range base {
					base[i] = float32(i % 5)
				}
				ref, owner, recv := append([]float32(nil), base...), append([]float32(nil), base...), append([]float32(nil), base...)
				errSq, refSq := QuantizeRows(got, owner, x, x, width, bits, key, hash, nil, add, 1)
				if string(want) != string(got) {
					t.Fatalf("width %d int%d: C encoding differs from the reference", width, bits)
				}
				wire.Decode(ref, want, width, bits, add)
				DequantizeRows(recv, want, width, bits, add)
				var e2, x2 float64
				for i := range ref {
					if math.Float32bits(ref[i]) != math.Float32bits(recv[i]) || math.Float32bits(ref[i]) != math.Float32bits(owner[i]) {
						t.Fatalf("width %d int%d add=%v: element %d: receiver %g, owner %g, reference %g", width, bits, add, i, recv[i], owner[i], ref[i])
					}
					d := float64(ref[i] - base[i] - x[i])
					if !add {
						d = float64(ref[i] - x[i])
					}
					e2 += d * d
					x2 += float64(x[i]) * float64(x[i])
				}
				if math.Abs(errSq-e2) > 1e-4*e2 || math.Abs(refSq-x2) > 1e-4*x2 {
					t.Fatalf("width %d int%d: error sums %g, %g; want %g, %g", width, bits, errSq, refSq, e2, x2)
				}
				// A sample of every 8th row measures those rows alone.
				var s2 float64
				for i := 0; i < len(x); i += 8 * width {
					for _, v := range x[i : i+width] {
						s2 += float64(v) * float64(v)
					}
				}
				if _, sampled := QuantizeRows(got, owner, x, x, width, bits, key, hash, nil, false, 8); math.Abs(sampled-s2) > 1e-4*s2 {
					t.Fatalf("width %d int%d: sampled reference sum %g, want %g", width, bits, sampled, s2)
				}
			}
		}
	}
}

// TestExpWithin2ULP: the loss's exponential on x ≤ 0, against float64: 2
// ulp at most where e^x is a normal float, 0 below it and for −∞, NaN for
// NaN. Softmax hides a systematic error (it cancels in the ratios), so the
// exponential is checked on its own.
func TestExpWithin2ULP(t *testing.T) {
	var x []float32
	for v := float32(0); v > -87.3; v -= 0.0137 {
		x = append(x, v)
	}
	x = append(x, -1e-30, -87.33, float32(math.Inf(-1)), -90, -200, float32(math.NaN()))
	y := make([]float32, len(x))
	expNonPositive(x, y)
	for i, v := range x {
		want := math.Exp(float64(v))
		switch {
		case math.IsNaN(float64(v)):
			if !math.IsNaN(float64(y[i])) {
				t.Errorf("e^NaN = %g, want NaN", y[i])
			}
		case v < -87.3365:
			if y[i] != 0 {
				t.Errorf("e^%g = %g, want 0 (below the normal floats)", v, y[i])
			}
		default:
			ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1))) - float32(want))
			if d := math.Abs(float64(y[i]) - want); d > 2*ulp {
				t.Errorf("e^%g = %.9g, want %.9g (%.1f ulp)", v, y[i], want, d/ulp)
			}
		}
	}
}

// TestSoftmaxCEMatchesFloat64: the loss kernel (exponentials on vectors,
// rows padded to whole vectors, prefetched rows) against a float64
// reference, on scattered rows, widths that are not a vector's, logits
// that underflow the exponential and one row holding a NaN, which must come
// out as a NaN loss. Every SIMD level runs it (make test).
func TestSoftmaxCEMatchesFloat64(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct {
		c     int
		scale float32
	}{{1, 30}, {7, 30}, {16, 30}, {40, 30}, {7, 1}, {16, 1}, {40, 1}} {
		c := tc.c
		z := randDense(r, 3000, c)
		for i := range z.Data {
			// ×30: differences past -87, where e^x underflows to 0; ×1:
			// every probability large enough to test each exponential.
			z.Data[i] *= tc.scale
		}
		labels := make([]int32, z.Rows)
		for i := range labels {
			labels[i] = int32(r.IntN(c))
		}
		rows := make([]int32, 0, 1000)
		for _, i := range r.Perm(z.Rows)[:1000] {
			rows = append(rows, int32(i))
		}
		g := matrix.NewDense(z.Rows, c)
		got := SoftmaxCE(z, labels, rows, 7, g)
		var want float64
		listed := map[int32]bool{}
		for _, row := range rows {
			listed[row] = true
			x := z.Data[int(row)*c : int(row+1)*c]
			mx := math.Inf(-1)
			for _, v := range x {
				mx = math.Max(mx, float64(v))
			}
			var s float64
			for _, v := range x {
				s += math.Exp(float64(v) - mx)
			}
			want += math.Log(s) - (float64(x[labels[row]]) - mx)
			for k, v := range x {
				dw := math.Exp(float64(v)-mx) / s
				if k == int(labels[row]) {
					dw--
				}
				// vexp within 2 ulp, the rest in double: a few parts in 1e7.
				if d := math.Abs(float64(g.Data[int(row)*c+k]) - dw/7); d > 4e-7*math.Abs(dw/7)+4e-8 {
					t.Fatalf("c=%d row %d col %d: gradient %g, want %g", c, row, k, g.Data[int(row)*c+k], dw/7)
				}
			}
		}
		if math.Abs(got-want) > 1e-6*want {
			t.Fatalf("c=%d: loss %.9g, want %.9g", c, got, want)
		}
		for i := range z.Rows {
			for k := range c {
				if !listed[int32(i)] && g.Data[i*c+k] != 0 {
					t.Fatalf("c=%d: row %d is not listed but has gradient %g", c, i, g.Data[i*c+k])
				}
			}
		}
		z.Data[int(rows[3])*c+c-1] = float32(math.NaN())
		if l := SoftmaxCE(z, labels, rows, 7, g); !math.IsNaN(l) {
			t.Fatalf("c=%d: a NaN logit gave loss %g", c, l)
		}
	}
}

// TestSoftmaxCELogOfProduct: the kernel takes its rows' logs as one log of
// their sums' product; with 1,000 equal logits a row (each sum 1,000) a
// chunk's product is 10^1536, which overflows unless the product is kept
// scaled. The loss is each row's log 1,000, to rounding.
func TestSoftmaxCELogOfProduct(t *testing.T) {
	const n, c = 1200, 1000
	z := matrix.NewDense(n, c)
	labels := make([]int32, n)
	rows := make([]int32, n)
	for i := range rows {
		rows[i], labels[i] = int32(i), int32(i%c)
	}
	got, want := SoftmaxCE(z, labels, rows, 1, nil), n*math.Log(c)
	if math.Abs(got-want) > 1e-12*want {
		t.Fatalf("loss %.15g, want %.15g", got, want)
	}
}

// TestSoftmaxCEInPlace: the loss at listed rows written over the logits
// leaves there the bits it writes into a buffer of its own, and, with the
// other rows zeroed, the whole gradient SoftmaxCE forms.
func TestSoftmaxCEInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	for _, c := range []int{1, 7, 16, 40} {
		z := randDense(r, 500, c)
		labels := make([]int32, z.Rows)
		for i := range labels {
			labels[i] = int32(r.IntN(c))
		}
		rows := []int32{1, 3, 4, 5, 99, 250, 251, 497} // gaps first, between and last
		want := matrix.NewDense(z.Rows, c)
		wantLoss := SoftmaxCE(z, labels, rows, 3, want)
		if got := SoftmaxCERows(z, labels, rows, 3, z); got != wantLoss {
			t.Fatalf("c=%d: in place loss %v, want %v", c, got, wantLoss)
		}
		if err := ZeroOtherRows(z, rows); err != nil {
			t.Fatal(err)
		}
		for i, v := range z.Data {
			if math.Float32bits(v) != math.Float32bits(want.Data[i]) {
				t.Fatalf("c=%d: row %d col %d in place %g, want %g", c, i/c, i%c, v, want.Data[i])
			}
		}
	}
	z := matrix.NewDense(4, 2)
	for _, bad := range [][]int32{{2, 1}, {1, 1}, {0, 4}} {
		if err := ZeroOtherRows(z, bad); err == nil {
			t.Errorf("rows %v: no error", bad)
		}
	}
}

// TestNNZCuts: each cut is the first row at which the rows before it hold
// t/parts of the nonzeros (plus one per row), as a scan over the rows finds.
func TestNNZCuts(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, rows := range []int{1, 7, 5000, 20000} {
		rowptr := make([]int64, rows+1)
		for i := range rows {
			rowptr[i+1] = rowptr[i] + int64(r.IntN(3)*r.IntN(3)) // empty rows too
		}
		for _, parts := range []int{1, 2, 3, 8} {
			got := nnzCuts(rowptr, parts)
			total := rowptr[rows] + int64(rows)
			if got[0] != 0 || got[len(got)-1] != rows {
				t.Fatalf("rows %d parts %d: cuts %v do not span the rows", rows, parts, got)
			}
			if total < 4096 || parts == 1 {
				continue
			}
			for k := 1; k < parts; k++ {
				target, want := total*int64(k)/int64(parts), 0
				for want < rows && rowptr[want]+int64(want) < target {
					want++
				}
				if got[k] != want {
					t.Fatalf("rows %d parts %d: cut %d at %d, want %d", rows, parts, k, got[k], want)
				}
			}
		}
	}
}

// TestSumRepeated: every element is read once per repeat, whatever the
// split and level (small integers, so any order of the adds is exact).
func TestSumRepeated(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 1 << 14, 3<<14 + 7} {
		x := make([]float32, n)
		want := 0.0
		for i := range x {
			x[i] = float32(i%5 - 1)
			want += float64(x[i])
		}
		for _, reps := range []int{1, 3} {
			if got := SumRepeated(x, reps); got != float64(reps)*want {
				t.Errorf("n %d, %d repeats: sum %g, want %g", n, reps, got, float64(reps)*want)
			}
		}
	}
}

// TestWeightGradientKeepsNoGarbage: a weight gradient's partial sums are
// reused, not made per call (they were most of an epoch's garbage, and a
// long run's heap grew by them).
func TestWeightGradientKeepsNoGarbage(t *testing.T) {
	a, g, dw := matrix.NewDense(100000, 128), matrix.NewDense(100000, 16), matrix.NewDense(128, 16)
	GEMMTN(dw, a, g)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		if err := GEMMTN(dw, a, g); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// 25 chunks of 128×16 partial sums are 200 KB a call; goroutines and
	// closures are a few hundred bytes.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Fatalf("20 weight gradients allocated %d KB", grew>>10)
	}
}

// GatherRows and ScatterRows move exactly the listed rows, for a GNN's
// one-line rows and for widths that are not whole cache lines, packs
// streamed past the caches (a large pack's) too, and refuse a row outside
// the block or a packed buffer too short.
func TestGatherScatterRows(t *testing.T) {
	defer func(b int) { streamGatherBytes = b }(streamGatherBytes)
	r := rand.New(rand.NewPCG(5, 6))
	for k, w := range []int{64, 12, 200, 64, 48} {
		if k >= 3 {
			streamGatherBytes = 1 // every pack of whole 16-byte units streams
		}
		const n = 1000
		block := make([]byte, n*w)
		for i := range block {
			block[i] = byte(r.IntN(256))
		}
		var rows []int32
		for i := range n {
			if r.IntN(3) == 0 {
				rows = append(rows, int32(i))
			}
		}
		r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		packed := make([]byte, len(rows)*w)
		if err := GatherRows(packed, block, rows, w); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, len(block))
		if err := ScatterRows(back, packed, rows, w); err != nil {
			t.Fatal(err)
		}
		listed := make([]bool, n)
		for k, row := range rows {
			listed[row] = true
			if !bytes.Equal(packed[k*w:(k+1)*w], block[int(row)*w:int(row+1)*w]) {
				t.Fatalf("w=%d: packed row %d is not block row %d", w, k, row)
			}
		}
		for i := range n {
			want := block[i*w : (i+1)*w]
			if !listed[i] {
				want = make([]byte, w) // never written
			}
			if !bytes.Equal(back[i*w:(i+1)*w], want) {
				t.Fatalf("w=%d: scattered row %d wrong (listed %v)", w, i, listed[i])
			}
		}
	}
	block, packed := make([]byte, 10*64), make([]byte, 2*64)
	if err := GatherRows(packed, block, []int32{3, 10}, 64); err == nil || !strings.Contains(err.Error(), "entry 1 is 10") {
		t.Errorf("row past the block: %v", err)
	}
	if err := ScatterRows(block, packed[:64], []int32{3, 4}, 64); err == nil || !strings.Contains(err.Error(), "need 128 bytes") {
		t.Errorf("short packed buffer: %v", err)
	}
}

// AddRows adds each packed row to the listed row alone, at widths that
// are and are not whole vectors, and refuses a row outside the block.
func TestAddRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, w := range []int{72, 8, 1, 13} {
		const n = 500
		dst, src := make([]float32, n*w), make([]float32, n*w)
		for i := range dst {
			dst[i], src[i] = float32(r.IntN(100)), float32(r.IntN(100))
		}
		want := slices.Clone(dst)
		var rows []int32
		for i := range n {
			if r.IntN(2) == 0 {
				rows = append(rows, int32(i))
			}
		}
		r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		for k, row := range rows {
			for c := range w {
				want[int(row)*w+c] += src[k*w+c]
			}
		}
		if err := AddRows(dst, src, rows, w); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(dst, want) {
			t.Fatalf("w=%d: rows added wrong", w)
		}
	}
	if err := AddRows(make([]float32, 10*8), make([]float32, 8), []int32{10}, 8); err == nil || !strings.Contains(err.Error(), "entry 0 is 10") {
		t.Errorf("row past the block: %v", err)
	}
}

// TestRegisteredCodecsMatchTheReference: the codec each wire width looks
// up (the C one for the integer widths) writes the reference's bytes and
// decoded rows, adds a delta alike, and reports the same error.
func TestRegisteredCodecsMatchTheReference(t *testing.T) {
	const rows, width, key = 300, 24, 99
	rng := rand.New(rand.NewPCG(5, 6))
	x, base := make([]float32, rows*width), make([]float32, rows*width)
	for i := range x {
		x[i], base[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	hash := make([]uint64, rows)
	for i := range hash {
		hash[i] = wire.RowHash(uint64(3 * i))
	}
	for _, bits := range []int{8, 4, 2} {
		var got wire.Codec = IntCodec(bits) // a Codec without importing wire: the methods match
		ref := wire.Reference(bits)
		for _, add := range []bool{false, true} {
			pg, pr := make([]byte, rows*got.RowBytes(width)), make([]byte, rows*ref.RowBytes(width))
			dg, dr := slices.Clone(base), slices.Clone(base)
			blk := x // what the decoded rows stand for: with add, the copy plus the delta
			if add {
				blk = make([]float32, len(x))
				for i := range x {
					blk[i] = base[i] + x[i]
				}
			}
			eg, rg := got.Encode(pg, dg, x, blk, width, key, hash, add, 3)
			er, rr := ref.Encode(pr, dr, x, blk, width, key, hash, add, 3)
			if !bytes.Equal(pg, pr) || !slices.Equal(dg, dr) {
				t.Fatalf("%d bits add=%v: packed or decoded rows differ from the reference", bits, add)
			}
			if math.Abs(eg-er) > 1e-5*er || math.Abs(rg-rr) > 1e-6*rr { // sums in another order; with add, C measures the delta's error
				t.Fatalf("%d bits add=%v: error sums %g/%g, reference %g/%g", bits, add, eg, rg, er, rr)
			}
			recv := slices.Clone(base)
			got.Decode(recv, pr, width, add)
			if !slices.Equal(recv, dr) {
				t.Fatalf("%d bits add=%v: a receiver decodes other values than the owner holds", bits, add)
			}
		}
	}
}

// TestELU: ELU is e^x − 1 within the exponential's 2 ulp (and the
// subtraction's rounding) at every negative value, leaves the others, is 0
// far below; its backward scales g by h + 1 where h ≤ 0.
func TestELU(t *testing.T) {
	var xs []float32
	for x := float32(-100); x < 5; x += 0.0137 {
		xs = append(xs, x)
	}
	xs = append(xs, 0, -0.0)
	z := matrix.NewDense(len(xs), 1)
	copy(z.Data, xs)
	ELU(z)
	for i, x := range xs {
		want := float64(x)
		if x < 0 {
			want = math.Exp(float64(x)) - 1
		}
		if got := float64(z.Data[i]); math.Abs(got-want) > 2.5e-7*math.Exp(min(float64(x), 0))+6e-8 {
			t.Fatalf("ELU(%g) = %g, want %g", x, got, want)
		}
	}
	if e := z.Data[0]; e != -1 {
		t.Fatalf("ELU(-100) = %g, want -1", e)
	}
	g := matrix.NewDense(len(xs), 1)
	for i := range g.Data {
		g.Data[i] = 2
	}
	ELUBackward(g, z)
	for i, h := range z.Data {
		want := float32(2)
		if h <= 0 {
			want = 2 * (h + 1)
		}
		if g.Data[i] != want {
			t.Fatalf("ELU backward at h = %g: %g, want %g", h, g.Data[i], want)
		}
	}
}

// TestAddAndScaleRows: a += b elementwise; row r of dst is row r of src
// times s[r], for the rows s lists, across thread splits.
func TestAddAndScaleRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	a, b := matrix.NewDense(1000, 7), matrix.NewDense(1000, 7)
	for i := range a.Data {
		a.Data[i], b.Data[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	want := slices.Clone(a.Data)
	for i := range want {
		want[i] += b.Data[i]
	}
	Add(a, b)
	if !slices.Equal(a.Data, want) {
		t.Fatal("Add differs from a += b")
	}
	s := make([]float32, 999)
	for i := range s {
		s[i] = float32(i%5) / 3
	}
	for _, w := range []int{7, 16} { // a partial vector and whole ones
		src := matrix.NewDense(1000, w)
		for i := range src.Data {
			src.Data[i] = float32(rng.NormFloat64())
		}
		dst := matrix.NewDense(1000, w)
		dst.Data[999*w] = 42 // past the rows s lists: untouched
		ScaleRows(dst, src, s)
		for r := range s {
			for k := range w {
				if dst.Data[r*w+k] != src.Data[r*w+k]*s[r] {
					t.Fatalf("ScaleRows %d wide, row %d col %d: %g, want %g", w, r, k, dst.Data[r*w+k], src.Data[r*w+k]*s[r])
				}
			}
		}
		if dst.Data[999*w] != 42 {
			t.Fatal("ScaleRows wrote a row s does not list")
		}
	}
}

// TestTimedCountsCompulsoryBytes: Timed counts each operand once and each
// result once (twice when summed into), a CSR at 8 bytes a nonzero and 8 a
// row, per class; and two flops a multiply-add of each product, none
// elsewhere.
func TestTimedCountsCompulsoryBytes(t *testing.T) {
	tm := NewTimed(CPU{})
	a, b, c := matrix.NewDense(40, 30), matrix.NewDense(30, 20), matrix.NewDense(40, 20)
	if err := tm.GEMM(c, a, b, false); err != nil {
		t.Fatal(err)
	}
	if err := tm.GEMM(c, a, b, true); err != nil {
		t.Fatal(err)
	}
	if err := tm.GEMMTN(b, a, c); err != nil { // (40×30)ᵀ · 40×20
		t.Fatal(err)
	}
	before := tm.Snapshot()
	csr := &matrix.CSR{Rows: 30, Cols: 40, RowPtr: make([]int64, 31)}
	for r := range 30 { // one nonzero a row
		csr.RowPtr[r+1] = int64(r + 1)
		csr.ColIdx = append(csr.ColIdx, int32(r))
		csr.Val = append(csr.Val, 1)
	}
	out := matrix.NewDense(30, 20)
	if err := tm.SpMM(out, csr, c, false); err != nil {
		t.Fatal(err)
	}
	tm.ReLUBackward(c, c)
	gemm := Count{int64(4 * (3*(40*30+30*20+40*20) + 40*20)), 3 * 2 * 40 * 30 * 20}
	spmm := Count{int64(8*30+8*31) + 4*(40*20+30*20), 2 * 30 * 20}
	elem := Count{int64(4 * 3 * 40 * 20), 0}
	if got := tm.Counts; got["gemm"] != gemm || got["spmm"] != spmm || got["elementwise"] != elem {
		t.Fatalf("counts %v, want gemm %v, spmm %v, elementwise %v", got, gemm, spmm, elem)
	}
	if _, ok := before["spmm"]; ok || before["gemm"] != gemm {
		t.Fatalf("snapshot %v moved with the counts after it", before)
	}
	if (*Timed)(nil).Snapshot() != nil {
		t.Fatal("a nil Timed counts")
	}
}

// TestEncodeRowsEncodesThoseAlone: encoding a list of rows writes, at
// those rows, the bytes and decoded values a whole encode writes there,
// leaves every other row as it was, and sums its error over every
// errEvery-th row of the list; the C codecs and the reference (their own
// row lists) and a codec without one (rows gathered first) agree. Widths
// 24 and 13 take the vector and the portable kernel.
func TestEncodeRowsEncodesThoseAlone(t *testing.T) {
	const rows, key = 300, 7
	rng := rand.New(rand.NewPCG(8, 9))
	list := []int32{0, 3, 4, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 99, 250, 299}
	for _, width := range []int{24, 13} {
		x := make([]float32, rows*width)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		hash := make([]uint64, rows)
		for i := range hash {
			hash[i] = wire.RowHash(uint64(5 * i))
		}
		for _, bits := range []int{8, 4, 2} {
			// gathered: a codec without EncodeRows of its own
			codecs := map[string]wire.Codec{"C": IntCodec(bits), "reference": wire.Reference(bits), "gathered": struct{ wire.Codec }{wire.Reference(bits)}}
			for name, c := range codecs {
				rb := c.RowBytes(width)
				whole, wdec := make([]byte, rows*rb), make([]float32, rows*width)
				c.Encode(whole, wdec, x, x, width, key, hash, false, 1)
				got, dec := bytes.Repeat([]byte{0xa5}, rows*rb), make([]float32, rows*width)
				for i := range dec {
					dec[i] = -3
				}
				errSq, refSq := wire.EncodeRows(c, got, dec, x, x, width, key, hash, list, false, 3)
				listed := map[int32]bool{}
				for _, r := range list {
					listed[r] = true
				}
				var e2, x2 float64
				for r := range int32(rows) {
					gb, gd := got[int(r)*rb:int(r+1)*rb], dec[int(r)*width:int(r+1)*width]
					if !listed[r] {
						if !bytes.Equal(gb, bytes.Repeat([]byte{0xa5}, rb)) || slices.ContainsFunc(gd, func(v float32) bool { return v != -3 }) {
							t.Fatalf("%s int%d width %d: row %d, not listed, was written", name, bits, width, r)
						}
						continue
					}
					if !bytes.Equal(gb, whole[int(r)*rb:int(r+1)*rb]) || !slices.Equal(gd, wdec[int(r)*width:int(r+1)*width]) {
						t.Fatalf("%s int%d width %d: row %d differs from a whole encode", name, bits, width, r)
					}
				}
				for k := 0; k < len(list); k += 3 {
					r := int(list[k])
					for i := r * width; i < (r+1)*width; i++ {
						d := float64(wdec[i] - x[i])
						e2 += d * d
						x2 += float64(x[i]) * float64(x[i])
					}
				}
				if math.Abs(errSq-e2) > 1e-4*e2 || math.Abs(refSq-x2) > 1e-4*x2 {
					t.Fatalf("%s int%d width %d: error sums %g, %g; want %g, %g", name, bits, width, errSq, refSq, e2, x2)
				}
			}
		}
	}
}

//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
)

func open(t testing.TB) *Backend {
	t.Helper()
	b, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func randDense(r *rand.Rand, rows, cols int) *matrix.Dense {
	d := matrix.NewDense(rows, cols)
	for i := range d.Data {
		d.Data[i] = float32(r.NormFloat64())
	}
	return d
}

// randCSR has sorted unique columns and some empty rows.
func randCSR(r *rand.Rand, rows, cols, perRow int) *matrix.CSR {
	a := &matrix.CSR{Rows: rows, Cols: cols, RowPtr: make([]int64, rows+1)}
	for i := 0; i < rows; i++ {
		k := r.IntN(2 * perRow)
		if i%7 == 3 {
			k = 0
		}
		seen := map[int32]bool{}
		var cs []int32
		for len(cs) < min(k, cols) {
			c := int32(r.IntN(cols))
			if !seen[c] {
				seen[c] = true
				cs = append(cs, c)
			}
		}
		for x := 1; x < len(cs); x++ {
			for y := x; y > 0 && cs[y] < cs[y-1]; y-- {
				cs[y], cs[y-1] = cs[y-1], cs[y]
			}
		}
		for _, c := range cs {
			a.ColIdx = append(a.ColIdx, c)
			a.Val = append(a.Val, float32(r.NormFloat64()))
		}
		a.RowPtr[i+1] = int64(len(a.ColIdx))
	}
	return a
}

// onDevice copies a host matrix into a new device matrix.
func onDevice(b *Backend, d *matrix.Dense) *matrix.Dense {
	x := b.NewDense(d.Rows, d.Cols)
	copy(x.Data, d.Data)
	b.Upload(x)
	return x
}

func fetch(t *testing.T, b *Backend, d *matrix.Dense) []float32 {
	t.Helper()
	b.Download(d)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return d.Data
}

func near(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d > tol*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s: element %d = %g, CPU %g", what, i, got[i], want[i])
		}
	}
}

// checkSpMM compares C = A·X and C += A·X (C starting at c0) with the CPU's.
func checkSpMM(t *testing.T, b *Backend, what string, a *matrix.CSR, x, c0 *matrix.Dense) {
	t.Helper()
	for _, acc := range []bool{false, true} {
		want := c0.Clone()
		kernels.SpMM(want, a, x, acc)
		got := onDevice(b, c0)
		if err := b.SpMM(got, a, onDevice(b, x), acc); err != nil {
			t.Fatal(err)
		}
		near(t, what, fetch(t, b, got), want.Data, 1e-5)
	}
}

func TestKernelsMatchCPU(t *testing.T) {
	b := open(t)
	r := rand.New(rand.NewPCG(1, 2))
	const m, k, n = 9000, 37, 16 // m > tnChunk: split-K with two slabs and a tail

	a := randCSR(r, m, 5000, 6)
	x := randDense(r, 5000, n)
	c0 := randDense(r, m, n)
	checkSpMM(t, b, "spmm", a, x, c0)

	// Few long rows take the block-per-row kernel (widths 16 and 100).
	long := randCSR(r, 9, 20000, 800)
	for _, w := range []int{16, 100} {
		lx := randDense(r, 20000, w)
		want := matrix.NewDense(9, w)
		kernels.SpMM(want, long, lx, false)
		got := b.NewDense(9, w)
		b.SpMM(got, long, onDevice(b, lx), false)
		near(t, "spmm, long rows", fetch(t, b, got), want.Data, 1e-4)
	}

	A, B := randDense(r, m, k), randDense(r, k, n)
	want := matrix.NewDense(m, n)
	kernels.GEMM(want, A, B, false)
	got := b.NewDense(m, n)
	b.GEMM(got, onDevice(b, A), B, false) // B stays on the host: uploaded on use
	near(t, "gemm", fetch(t, b, got), want.Data, 1e-4)

	G := randDense(r, m, n)
	wantT := matrix.NewDense(k, n)
	kernels.GEMMTN(wantT, A, G)
	gotT := b.NewDense(k, n)
	b.GEMMTN(gotT, onDevice(b, A), onDevice(b, G))
	near(t, "gemm Aᵀ·B", fetch(t, b, gotT), wantT.Data, 1e-3)

	wantNT := matrix.NewDense(m, k)
	kernels.GEMMNT(wantNT, G, B)
	gotNT := b.NewDense(m, k)
	b.GEMMNT(gotNT, onDevice(b, G), B)
	near(t, "gemm A·Bᵀ", fetch(t, b, gotNT), wantNT.Data, 1e-4)

	bias := make([]float32, n)
	for i := range bias {
		bias[i] = float32(r.NormFloat64())
	}
	h := c0.Clone()
	kernels.AddBiasReLU(h, bias, true)
	hd := onDevice(b, c0)
	b.AddBiasReLU(hd, bias, true)
	near(t, "bias+relu", fetch(t, b, hd), h.Data, 0)

	g := G.Clone()
	kernels.ReLUBackward(g, h)
	gd := onDevice(b, G)
	b.ReLUBackward(gd, hd)
	near(t, "relu backward", fetch(t, b, gd), g.Data, 0)

	sums := make([]float32, n)
	kernels.ColumnSums(sums, G)
	gotSums := make([]float32, n)
	b.ColumnSums(gotSums, onDevice(b, G))
	near(t, "column sums", gotSums, sums, 1e-4)

	if got, want := b.Norm(onDevice(b, G)), kernels.FrobNorm(G.Data); math.Abs(got-want) > 1e-9*want {
		t.Fatalf("norm %v, CPU %v", got, want)
	}
	labels := make([]int32, m)
	for i := range labels {
		labels[i] = int32(r.IntN(n))
	}
	rows := []int32{5, 0, 8999, 17, 4096}
	wantG := matrix.NewDense(m, n)
	wantLoss := kernels.SoftmaxCE(G, labels, rows, 3, wantG)
	gotG := b.NewDense(m, n)
	// The CPU takes the exponentials in float32 (expf, since eb02954), the
	// GPU in double: the losses agree to float32 rounding, not double's.
	if gotLoss := b.LossGrad(onDevice(b, G), labels, rows, 3, gotG); math.Abs(gotLoss-wantLoss) > 1e-6*math.Abs(wantLoss) {
		t.Fatalf("loss %v, CPU %v", gotLoss, wantLoss)
	}
	near(t, "loss gradient", fetch(t, b, gotG), wantG.Data, 1e-6)

	sd := onDevice(b, G)
	b.Scale(sd, 0.25)
	sc := G.Clone()
	kernels.Scale(sc.Data, 0.25)
	near(t, "scale", fetch(t, b, sd), sc.Data, 0)
}

// Dropout must draw exactly the CPU's masks: positional ids, row offsets,
// widths that are not a multiple of 4, and sparse rows.
func TestDropoutMasksMatchCPU(t *testing.T) {
	b := open(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, cols := range []int{1, 3, 16, 37, 1433} {
		src := randDense(r, 300, cols)
		ids := make([]int64, src.Rows)
		for i := range ids {
			ids[i] = int64(r.IntN(1 << 40))
		}
		for _, m := range []matrix.Mask{
			{P: 0.5, Seed: 7, Stream: 3<<8 | 1, Row0: 1234},
			{P: 0.1, Seed: 9, Stream: 5, IDs: ids},
		} {
			want := matrix.NewDense(src.Rows, cols)
			kernels.Dropout(m, want, src)
			got := b.NewDense(src.Rows, cols)
			b.Dropout(m, got, onDevice(b, src))
			near(t, "dense dropout", fetch(t, b, got), want.Data, 0)
		}
	}

	// The layer-1 input: a sparse operand with dropout, O·W and Oᵀ·G.
	a := randCSR(r, 2000, 3000, 20)
	w := randDense(r, 3000, 16)
	g := randDense(r, 2000, 16)
	m := matrix.Mask{P: 0.5, Seed: 1, Stream: 77, Row0: 100}
	cpu := kernels.NewOperand(a)
	if !cpu.IsSparse() {
		t.Fatal("test operand should stay sparse")
	}
	in, err := b.Input(cpu)
	if err != nil {
		t.Fatal(err)
	}
	for _, mk := range []matrix.Mask{m, {}} {
		cpu.SetDropout(mk)
		in.SetDropout(mk)
		want := matrix.NewDense(2000, 16)
		cpu.Mul(want, w)
		got := b.NewDense(2000, 16)
		if err := in.Mul(got, w); err != nil {
			t.Fatal(err)
		}
		near(t, "input O·W", fetch(t, b, got), want.Data, 1e-5)
		wantT := matrix.NewDense(3000, 16)
		cpu.MulT(wantT, g)
		gotT := b.NewDense(3000, 16)
		if err := in.MulT(gotT, onDevice(b, g)); err != nil {
			t.Fatal(err)
		}
		near(t, "input Oᵀ·G", fetch(t, b, gotT), wantT.Data, 1e-5)
	}
}

// A wrong shape is an error, not a device fault.
func TestShapeErrors(t *testing.T) {
	b := open(t)
	if err := b.GEMM(b.NewDense(3, 3), b.NewDense(3, 4), b.NewDense(5, 3), false); err == nil {
		t.Fatal("mismatched GEMM accepted")
	}
	if err := b.SpMM(b.NewDense(2, 2), &matrix.CSR{Rows: 2, Cols: 3, RowPtr: make([]int64, 3)}, b.NewDense(2, 2), false); err == nil {
		t.Fatal("mismatched SpMM accepted")
	}
	host := matrix.NewDense(2, 2)
	b.Scale(host, 2)
	if b.Err() == nil {
		t.Fatal("writing a host-only matrix was not reported")
	}
}

// The optional kernels: the vectorized SpMM at widths 4–256 (with and
// without accumulation, rows of every length), ELU and its backward,
// GraphSAGE's sum and row scaling. The module under test must hold them:
// a run that fell back to host copies would prove nothing here.
func TestOptionalKernelsMatchCPU(t *testing.T) {
	b := open(t)
	if m := b.Missing(); len(m) > 0 {
		t.Fatalf("optional kernels missing from the module: %v", m)
	}
	r := rand.New(rand.NewPCG(5, 6))
	a := randCSR(r, 3001, 2000, 9)
	for _, n := range []int{4, 16, 64, 256} {
		checkSpMM(t, b, "spmm (float4)", a, randDense(r, 2000, n), randDense(r, 3001, n))
	}

	// Wide products take the tiled GEMM: A·B, A·Bᵀ and Aᵀ·B (split-K).
	for _, sh := range [][3]int{{3001, 130, 256}, {777, 70, 100}, {9000, 64, 64}} {
		m, k, n := sh[0], sh[1], sh[2]
		A, B, G := randDense(r, m, k), randDense(r, k, n), randDense(r, m, n)
		want := matrix.NewDense(m, n)
		kernels.GEMM(want, A, B, false)
		got := b.NewDense(m, n)
		if err := b.GEMM(got, onDevice(b, A), B, false); err != nil {
			t.Fatal(err)
		}
		near(t, fmt.Sprintf("gemm %v", sh), fetch(t, b, got), want.Data, 1e-4)
		wantT := matrix.NewDense(k, n)
		kernels.GEMMTN(wantT, A, G)
		gotT := b.NewDense(k, n)
		b.GEMMTN(gotT, onDevice(b, A), onDevice(b, G))
		near(t, fmt.Sprintf("gemm Aᵀ·B %v", sh), fetch(t, b, gotT), wantT.Data, 1e-3)
		Bt := randDense(r, n, k)
		wantNT := matrix.NewDense(m, n)
		kernels.GEMMNT(wantNT, A, Bt)
		gotNT := b.NewDense(m, n)
		b.GEMMNT(gotNT, onDevice(b, A), Bt)
		near(t, fmt.Sprintf("gemm A·Bᵀ %v", sh), fetch(t, b, gotNT), wantNT.Data, 1e-4)
	}

	z := randDense(r, 777, 33)
	want := z.Clone()
	kernels.ELU(want)
	zd := onDevice(b, z)
	b.ELU(zd)
	near(t, "elu", fetch(t, b, zd), want.Data, 1e-6)

	g := randDense(r, 777, 33)
	wantG := g.Clone()
	kernels.ELUBackward(wantG, want)
	gd := onDevice(b, g)
	b.ELUBackward(gd, zd)
	near(t, "elu backward", fetch(t, b, gd), wantG.Data, 1e-6)

	sum := z.Clone()
	kernels.Add(sum, g)
	sd := onDevice(b, z)
	b.Add(sd, onDevice(b, g))
	near(t, "add", fetch(t, b, sd), sum.Data, 0)

	s := make([]float32, 500) // fewer rows than the matrix: the rest stay
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	dst := randDense(r, 777, 33)
	wantS := dst.Clone()
	kernels.ScaleRows(wantS, g, s)
	dd := onDevice(b, dst)
	b.ScaleRows(dd, onDevice(b, g), s)
	near(t, "scale rows", fetch(t, b, dd), wantS.Data, 0)
}

// A row list refilled with other values (a cluster batch's training rows)
// is uploaded anew; blocks made and dropped per step are freed, not kept
// on the device for the rest of the run.
func TestPerStepDataIsFreshAndFreed(t *testing.T) {
	b := open(t)
	r := rand.New(rand.NewPCG(7, 8))
	g := randDense(r, 100, 5)
	labels := make([]int32, 100)
	for i := range labels {
		labels[i] = int32(r.IntN(5))
	}
	gd, grad := onDevice(b, g), b.NewDense(100, 5)
	rows := make([]int32, 7)
	for step := range 3 {
		for i := range rows {
			rows[i] = int32(r.IntN(100))
		}
		want := kernels.SoftmaxCE(g, labels, rows, 1, matrix.NewDense(100, 5))
		if got := b.LossGrad(gd, labels, rows, 1, grad); math.Abs(got-want) > 1e-6*math.Abs(want) {
			t.Fatalf("step %d: loss %v over the refilled rows, CPU %v", step, got, want)
		}
	}
	x, c := onDevice(b, randDense(r, 100, 8)), b.NewDense(200, 8)
	before := len(b.all)
	for range 50 {
		if err := b.SpMM(c, randCSR(r, 200, 100, 4), x, false); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
	}
	if n := len(b.all) - before; n > 3*2 || len(b.csrs) > 2 {
		t.Fatalf("after 50 dropped blocks: %d more allocations, %d blocks held", n, len(b.csrs))
	}
}

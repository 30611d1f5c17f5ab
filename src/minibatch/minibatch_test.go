package minibatch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/sample"
)

// randomBatch makes a batch of layers blocks by hand: block l computes
// sizes[l+1] vertices from sizes[l] (each a prefix of the one below),
// with random edges and weights.
func randomBatch(r *rand.Rand, sizes []int, width, classes int) *sample.Batch {
	b := &sample.Batch{}
	for l := 0; l+1 < len(sizes); l++ {
		ns, nt := sizes[l], sizes[l+1]
		adj := &matrix.CSR{Rows: nt, Cols: ns, RowPtr: make([]int64, nt+1)}
		for i := range nt {
			for j := range ns {
				if j == i || r.IntN(3) == 0 {
					adj.ColIdx, adj.Val = append(adj.ColIdx, int32(j)), append(adj.Val, float32(0.2+r.Float64()))
				}
			}
			adj.RowPtr[i+1] = int64(len(adj.ColIdx))
		}
		ids := make([]int64, ns)
		for i := range ids {
			ids[i] = int64(100 + i)
		}
		b.Blocks = append(b.Blocks, sample.Block{Dst: ids[:nt], Src: ids, SrcOrig: ids, Adj: adj})
	}
	b.X = matrix.NewDense(sizes[0], width)
	for i := range b.X.Data {
		b.X.Data[i] = float32(r.NormFloat64())
	}
	for range sizes[len(sizes)-1] {
		b.Labels = append(b.Labels, int32(r.IntN(classes)))
	}
	return b
}

// Step's gradients are the loss's derivatives: central differences of
// the summed loss agree with them for every parameter, for GCN and
// GraphSAGE of 2 and 3 layers, with dropout (its masks are fixed by the
// step).
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		arch   model.Arch
		sizes  []int
		sparse bool
	}{{model.ArchGCN, []int{9, 5, 3}, false}, {model.ArchSAGE, []int{9, 5, 3}, false}, {model.ArchSAGE, []int{12, 8, 5, 3}, false}, {model.ArchGCN, []int{12, 8, 5, 3}, false},
		{model.ArchGCN, []int{9, 5, 3}, true}, {model.ArchSAGE, []int{12, 8, 5, 3}, true}, {model.ArchSAGE, []int{7, 4}, true}} {
		dims := []int{4}
		for range len(c.sizes) - 2 {
			dims = append(dims, 6)
		}
		dims = append(dims, 3)
		m, err := model.New(c.arch, dims, nil, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range m.B { // biases away from 0: a row whose input is all zeros sits at b, off ReLU's kink
			for i := range w {
				w[i] = float32((0.05 + 0.1*math.Abs(r.NormFloat64())) * float64(1-2*r.IntN(2)))
			}
		}
		b := randomBatch(r, c.sizes, dims[0], 3)
		if c.sparse {
			b.X, b.XSparse = nil, sparseOf(b.X)
		}
		checkGradients(t, m, b, Dropout{P: 0.3, Seed: 5, Step: 2}, fmt.Sprintf("%v %v sparse %v", c.arch, c.sizes, c.sparse))
	}
}

// checkGradients holds Step's gradients of m on b to central differences
// of its loss, parameter by parameter, the masks fixed by drop.
func checkGradients(t *testing.T, m *model.GCN, b *sample.Batch, drop Dropout, what string) {
	t.Helper()
	const norm = 4.0
	_, grads, err := Step(m, b, norm, drop)
	if err != nil {
		t.Fatal(err)
	}
	loss := func() float64 {
		l, _, err := Step(m, b, norm, drop)
		if err != nil {
			t.Fatal(err)
		}
		return l / norm
	}
	i := 0
	for _, p := range m.Flat() {
		for k := range p {
			v := p[k]
			const h = 1e-3
			p[k] = v + h
			up := loss()
			p[k] = v - h
			down := loss()
			p[k] = v
			num := (up - down) / (2 * h)
			if math.Abs(num-float64(grads[i])) > 2e-3+0.02*math.Abs(num) {
				t.Fatalf("%s: parameter %d: gradient %g, central difference %g", what, i, grads[i], num)
			}
			i++
		}
	}
}

// A batch without seeds gives no loss and zero gradients.
func TestEmptyBatch(t *testing.T) {
	m, _ := model.NewGCN([]int{4, 3}, 1)
	b := randomBatch(rand.New(rand.NewPCG(3, 4)), []int{0, 0}, 4, 3)
	loss, grads, err := Step(m, b, 1, Dropout{})
	if err != nil || loss != 0 {
		t.Fatalf("loss %g, err %v", loss, err)
	}
	for _, g := range grads {
		if g != 0 {
			t.Fatal("a batch without seeds has a gradient")
		}
	}
}

// sparseOf is d as CSR, its negative values dropped (zeros, as a bag of
// words has).
func sparseOf(d *matrix.Dense) *matrix.CSR {
	a := &matrix.CSR{Rows: d.Rows, Cols: d.Cols, RowPtr: make([]int64, d.Rows+1)}
	for i := range d.Rows {
		for j, v := range d.Row(i) {
			if v > 0 {
				a.ColIdx, a.Val = append(a.ColIdx, int32(j)), append(a.Val, v)
			}
		}
		a.RowPtr[i+1] = int64(len(a.ColIdx))
	}
	return a
}

// Layer 1 on sparse rows computes what it computes on the same rows
// dense: the same loss and gradients to 1e-5, with dropout, for each
// family.
func TestSparseRowsAreDenseRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		var heads []int
		if arch == model.ArchGAT {
			heads = []int{5, 2}
		}
		m, _ := model.New(arch, []int{6, 5, 3}, heads, 2)
		b := randomBatch(r, []int{10, 6, 4}, 6, 3)
		sp := *b
		sp.X, sp.XSparse = nil, sparseOf(b.X)
		b.X = sp.XSparse.ToDense()
		drop := Dropout{P: 0.4, Att: 0.3, Seed: 1, Step: 3}
		l1, g1, err := Step(m, b, 3, drop)
		if err != nil {
			t.Fatal(err)
		}
		l2, g2, err := Step(m, &sp, 3, drop)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(l1-l2) > 1e-5*l1 {
			t.Fatalf("%v: loss %g on dense rows, %g on sparse", arch, l1, l2)
		}
		for i := range g1 {
			if math.Abs(float64(g1[i]-g2[i])) > 1e-5*(1+math.Abs(float64(g1[i]))) {
				t.Fatalf("%v: gradient %d is %g on dense rows, %g on sparse", arch, i, g1[i], g2[i])
			}
		}
	}
}

// A GAT step's gradients are the loss's derivatives too: central
// differences agree with them for every parameter (W, b, a_l, a_r), with
// concatenated and averaged heads, 2 and 3 layers, dense and sparse rows,
// and with input and attention dropout (both fixed by the step).
func TestGATGradientsMatchFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		sizes, dims, heads []int
		sparse             bool
	}{
		{[]int{9, 5, 3}, []int{4, 6, 3}, []int{2, 1}, false},
		{[]int{12, 8, 5, 3}, []int{4, 6, 4, 3}, []int{3, 2, 2}, false},
		{[]int{9, 5, 3}, []int{4, 6, 3}, []int{3, 2}, true},
		{[]int{7, 4}, []int{5, 3}, []int{2}, true},
	} {
		m, err := model.NewGAT(c.dims, c.heads, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range append(append(m.B, dataOf(m.AttL)...), dataOf(m.AttR)...) {
			for i := range p { // attention vectors large enough that the coefficients differ
				p[i] = float32(0.3 * r.NormFloat64())
			}
		}
		b := randomBatch(r, c.sizes, c.dims[0], c.dims[len(c.dims)-1])
		if c.sparse {
			b.X, b.XSparse = nil, sparseOf(b.X)
		}
		checkGradients(t, m, b, Dropout{P: 0.3, Att: 0.3, Seed: 5, Step: 2}, fmt.Sprintf("GAT %v heads %v sparse %v", c.sizes, c.heads, c.sparse))
	}
}

func dataOf(ds []*matrix.Dense) [][]float32 {
	out := make([][]float32, len(ds))
	for i, d := range ds {
		out[i] = d.Data
	}
	return out
}

// Attention dropout drops coefficients: with it the step differs from the
// step without, and is the same step drawn again.
func TestGATAttentionDropoutIsKeyed(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	m, _ := model.NewGAT([]int{4, 6, 3}, []int{2, 1}, 3)
	b := randomBatch(r, []int{9, 5, 3}, 4, 3)
	l0, _, _ := Step(m, b, 3, Dropout{Seed: 1, Step: 4})
	l1, g1, _ := Step(m, b, 3, Dropout{Att: 0.5, Seed: 1, Step: 4})
	l2, g2, _ := Step(m, b, 3, Dropout{Att: 0.5, Seed: 1, Step: 4})
	if l0 == l1 || l1 != l2 {
		t.Fatalf("losses %g without attention dropout, %g and %g with it", l0, l1, l2)
	}
	for i := range g1 {
		if g1[i] != g2[i] {
			t.Fatalf("gradient %d: %g, then %g", i, g1[i], g2[i])
		}
	}
}

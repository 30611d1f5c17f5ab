package minibatch

import (
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
		arch  model.Arch
		sizes []int
	}{{model.ArchGCN, []int{9, 5, 3}}, {model.ArchSAGE, []int{9, 5, 3}}, {model.ArchSAGE, []int{12, 8, 5, 3}}, {model.ArchGCN, []int{12, 8, 5, 3}}} {
		dims := []int{4}
		for range len(c.sizes) - 2 {
			dims = append(dims, 6)
		}
		dims = append(dims, 3)
		m, err := model.New(c.arch, dims, nil, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range m.B { // non-zero biases: ReLU's kinks away from the points probed
			for i := range w {
				w[i] = float32(0.1 * r.NormFloat64())
			}
		}
		b := randomBatch(r, c.sizes, dims[0], 3)
		drop := Dropout{P: 0.3, Seed: 5, Step: 2}
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
				const h = 1e-2
				p[k] = v + h
				up := loss()
				p[k] = v - h
				down := loss()
				p[k] = v
				num := (up - down) / (2 * h)
				if math.Abs(num-float64(grads[i])) > 2e-3+0.02*math.Abs(num) {
					t.Fatalf("%v %v: parameter %d: gradient %g, central difference %g", c.arch, c.sizes, i, grads[i], num)
				}
				i++
			}
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

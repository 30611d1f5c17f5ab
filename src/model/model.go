// Package model holds what a GCN is made of, apart from how rows travel:
// replicated parameters (weights and biases per layer), Glorot init, Adam
// with L2 weight decay, and the softmax cross-entropy loss. The engine in
// src/train runs the layers over a rank's block of rows.
package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"sancus/kernels"
	"sancus/kernels/matrix"
)

// GCN is the parameter set of an L-layer GCN or GraphSAGE: layer l maps
// Dims[l] to Dims[l+1] features with W[l] (GraphSAGE: on the neighbours'
// mean) and B[l]; GraphSAGE adds Root[l], applied to the node itself.
type GCN struct {
	Dims []int
	W    []*matrix.Dense
	B    [][]float32
	Root []*matrix.Dense // nil for a GCN
}

// NewGCN draws Glorot-uniform weights and zero biases from seed, so every
// rank starts from identical parameters without communicating.
func NewGCN(dims []int, seed uint64) (*GCN, error) { return newModel(dims, seed, false) }

// NewSAGE is NewGCN with a root weight per layer (GraphSAGE-mean, as PyG's
// SAGEConv): h' = W·mean_{j∈N(i)} h_j + Root·h_i + b.
func NewSAGE(dims []int, seed uint64) (*GCN, error) { return newModel(dims, seed, true) }

// New makes the parameters of the named model ("gcn" or "sage").
func New(kind string, dims []int, seed uint64) (*GCN, error) {
	switch kind {
	case "gcn", "":
		return NewGCN(dims, seed)
	case "sage":
		return NewSAGE(dims, seed)
	}
	return nil, fmt.Errorf("model: unknown model %q (gcn or sage)", kind)
}

func newModel(dims []int, seed uint64, root bool) (*GCN, error) {
	if len(dims) < 2 {
		return nil, fmt.Errorf("model: need at least one layer, dims %v", dims)
	}
	for _, d := range dims {
		if d < 1 {
			return nil, fmt.Errorf("model: layer widths must be ≥ 1, got %v", dims)
		}
	}
	m := &GCN{Dims: dims}
	r := rand.New(rand.NewPCG(seed, 0x9c4))
	glorot := func(rows, cols int) *matrix.Dense {
		w := matrix.NewDense(rows, cols)
		lim := math.Sqrt(6 / float64(rows+cols))
		for i := range w.Data {
			w.Data[i] = float32((2*r.Float64() - 1) * lim)
		}
		return w
	}
	for l := 0; l+1 < len(dims); l++ {
		m.W = append(m.W, glorot(dims[l], dims[l+1]))
		m.B = append(m.B, make([]float32, dims[l+1]))
		if root {
			m.Root = append(m.Root, glorot(dims[l], dims[l+1]))
		}
	}
	return m, nil
}

// Kind is "gcn" or "sage".
func (m *GCN) Kind() string {
	if m.Root != nil {
		return "sage"
	}
	return "gcn"
}

// Tensors lists layer l's parameters in Flat order: W, b and, for
// GraphSAGE, Root.
func (m *GCN) Tensors(l int) [][]float32 {
	t := [][]float32{m.W[l].Data, m.B[l]}
	if m.Root != nil {
		t = append(t, m.Root[l].Data)
	}
	return t
}

// Layers is the number of layers.
func (m *GCN) Layers() int { return len(m.W) }

// Flat lists every parameter slice in a fixed order (W0, b0, [Root0], W1,
// b1, …): gradients are packed the same way for one allreduce, and
// checkpoints and model files use it.
func (m *GCN) Flat() [][]float32 {
	var out [][]float32
	for l := range m.W {
		out = append(out, m.Tensors(l)...)
	}
	return out
}

// NumParams counts scalar parameters.
func (m *GCN) NumParams() int {
	n := 0
	for _, p := range m.Flat() {
		n += len(p)
	}
	return n
}

// Adam is the optimizer of Kingma & Ba with L2 weight decay added to the
// gradient of selected parameters (Kipf & Welling decay the first layer only).
type Adam struct {
	LR, Beta1, Beta2, Eps float64
	Step                  int
	M, V                  []float32
}

// NewAdam makes an optimizer for n parameters.
func NewAdam(lr float64, n int) *Adam {
	return &Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, M: make([]float32, n), V: make([]float32, n)}
}

// Update applies one step. params are the parameter slices (GCN.Flat) and
// grads their gradients packed back to back in the same order.
func (a *Adam) Update(params [][]float32, grads []float32) {
	a.Step++
	b1, b2 := a.Beta1, a.Beta2
	c1 := 1 - math.Pow(b1, float64(a.Step))
	c2 := 1 - math.Pow(b2, float64(a.Step))
	lr := a.LR * math.Sqrt(c2) / c1
	i := 0
	for _, p := range params {
		for k := range p {
			gf := float64(grads[i])
			m := b1*float64(a.M[i]) + (1-b1)*gf
			v := b2*float64(a.V[i]) + (1-b2)*gf*gf
			a.M[i], a.V[i] = float32(m), float32(v)
			p[k] -= float32(lr * m / (math.Sqrt(v) + a.Eps*math.Sqrt(c2)))
			i++
		}
	}
}

// SoftmaxCE computes the summed cross-entropy over rows listed in mask and
// writes d(loss)/d(logits)/norm into grad (see kernels.SoftmaxCE).
func SoftmaxCE(logits *matrix.Dense, labels []int32, mask []int32, norm float64, grad *matrix.Dense) (lossSum float64) {
	return kernels.SoftmaxCE(logits, labels, mask, norm, grad)
}

// Correct counts rows in set whose argmax equals the label.
func Correct(logits *matrix.Dense, labels []int32, set []int32) int {
	n := 0
	for _, r := range set {
		row := logits.Row(int(r))
		best := 0
		for k, v := range row {
			if v > row[best] {
				best = k
			}
		}
		if int32(best) == labels[r] {
			n++
		}
	}
	return n
}

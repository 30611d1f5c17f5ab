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

// GCN is the parameter set of an L-layer GCN, GraphSAGE or GAT: layer l
// maps Dims[l] to Dims[l+1] features with W[l] (GraphSAGE: on the
// neighbours' mean) and B[l]; GraphSAGE adds Root[l], applied to the node
// itself. A GAT layer has Heads[l] heads of HeadWidth(l) features each: W[l]
// maps to all heads at once, AttL[l] and AttR[l] (one row, heads side by
// side) score a node as target and as neighbour; hidden layers concatenate
// the heads, the last one averages them.
type GCN struct {
	Dims       []int
	W          []*matrix.Dense
	B          [][]float32
	Root       []*matrix.Dense // nil unless GraphSAGE
	Heads      []int           // nil unless GAT
	AttL, AttR []*matrix.Dense
}

// NewGCN draws Glorot-uniform weights and zero biases from seed, so every
// rank starts from identical parameters without communicating.
func NewGCN(dims []int, seed uint64) (*GCN, error) { return newModel(dims, nil, seed, false) }

// NewSAGE is NewGCN with a root weight per layer (GraphSAGE-mean, as PyG's
// SAGEConv): h' = W·mean_{j∈N(i)} h_j + Root·h_i + b.
func NewSAGE(dims []int, seed uint64) (*GCN, error) { return newModel(dims, nil, seed, true) }

// NewGAT makes a GAT (Veličković et al.) with heads[l] heads in layer l;
// a hidden width Dims[l+1] must divide among its heads.
func NewGAT(dims, heads []int, seed uint64) (*GCN, error) {
	if len(heads) != len(dims)-1 {
		return nil, fmt.Errorf("model: %d layers need %d head counts, got %v", len(dims)-1, len(dims)-1, heads)
	}
	for l, h := range heads {
		if h < 1 || (l+2 < len(dims) && dims[l+1]%h != 0) {
			return nil, fmt.Errorf("model: layer %d's width %d does not split into %d heads", l+1, dims[l+1], h)
		}
	}
	return newModel(dims, heads, seed, false)
}

// New makes the parameters of a model of family a (heads only for GAT).
func New(a Arch, dims, heads []int, seed uint64) (*GCN, error) {
	switch a {
	case ArchGCN:
		return NewGCN(dims, seed)
	case ArchSAGE:
		return NewSAGE(dims, seed)
	case ArchGAT:
		return NewGAT(dims, heads, seed)
	}
	return nil, fmt.Errorf("model: unknown model %v", a)
}

func newModel(dims, heads []int, seed uint64, root bool) (*GCN, error) {
	if len(dims) < 2 {
		return nil, fmt.Errorf("model: need at least one layer, dims %v", dims)
	}
	for _, d := range dims {
		if d < 1 {
			return nil, fmt.Errorf("model: layer widths must be ≥ 1, got %v", dims)
		}
	}
	m := &GCN{Dims: dims, Heads: heads}
	r := rand.New(rand.NewPCG(seed, 0x9c4))
	glorot := func(rows, cols, fanIn, fanOut int) *matrix.Dense {
		w := matrix.NewDense(rows, cols)
		lim := math.Sqrt(6 / float64(fanIn+fanOut))
		for i := range w.Data {
			w.Data[i] = float32((2*r.Float64() - 1) * lim)
		}
		return w
	}
	for l := 0; l+1 < len(dims); l++ {
		_, cols := m.Shape(l, 0)
		m.W = append(m.W, glorot(dims[l], cols, dims[l], cols))
		m.B = append(m.B, make([]float32, dims[l+1]))
		if root {
			m.Root = append(m.Root, glorot(dims[l], dims[l+1], dims[l], dims[l+1]))
		}
		if heads != nil { // as PyG's GATConv: Glorot over (heads, head width)
			m.AttL = append(m.AttL, glorot(1, cols, heads[l], m.HeadWidth(l)))
			m.AttR = append(m.AttR, glorot(1, cols, heads[l], m.HeadWidth(l)))
		}
	}
	return m, nil
}

// Arch is the family the parameters are of.
func (m *GCN) Arch() Arch {
	switch {
	case m.Root != nil:
		return ArchSAGE
	case m.Heads != nil:
		return ArchGAT
	}
	return ArchGCN
}

// HeadWidth is a GAT layer's features per head.
func (m *GCN) HeadWidth(l int) int {
	if l+2 < len(m.Dims) {
		return m.Dims[l+1] / m.Heads[l]
	}
	return m.Dims[l+1]
}

// Tensors lists layer l's parameters in Flat order: W, b and, for
// GraphSAGE, Root; for GAT, AttL and AttR.
func (m *GCN) Tensors(l int) [][]float32 {
	t := [][]float32{m.W[l].Data, m.B[l]}
	if m.Root != nil {
		t = append(t, m.Root[l].Data)
	}
	if m.Heads != nil {
		t = append(t, m.AttL[l].Data, m.AttR[l].Data)
	}
	return t
}

// TensorNames names Tensors(l)'s entries.
func (m *GCN) TensorNames() []string {
	switch m.Arch() {
	case ArchSAGE:
		return []string{"W", "b", "Root"}
	case ArchGAT:
		return []string{"W", "b", "att_l", "att_r"}
	}
	return []string{"W", "b"}
}

// Shape is the (rows, cols) of Tensors(l)[k].
func (m *GCN) Shape(l, k int) (rows, cols int) {
	switch {
	case k == 1:
		return 1, m.Dims[l+1]
	case m.Heads == nil:
		return m.Dims[l], m.Dims[l+1]
	case k == 0:
		return m.Dims[l], m.Heads[l] * m.HeadWidth(l)
	}
	return 1, m.Heads[l] * m.HeadWidth(l)
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

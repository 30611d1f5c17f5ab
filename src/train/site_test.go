package train

import (
	"math"
	"slices"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
)

// stubSite is a layerSite with no engine behind it: the CPU backend, one
// input operand and one weight, and an exchange in which this rank is the
// only root and Â = I. Any other question a layer asks panics (the nil
// embedded interface), so a layer that needs more than its site fails.
type stubSite struct {
	layerSite
	be      kernels.Backend
	x       kernels.Input
	w       *matrix.Dense
	ro      kernels.RowOps // with rows: where a restricted last layer computes
	rows    []int32
	clipped int
}

func (s *stubSite) backend() kernels.Backend                 { return s.be }
func (s *stubSite) operand() kernels.Input                   { return s.x }
func (s *stubSite) weights(int) weights                      { return weights{W: s.w, B: make([]float32, s.w.Cols)} }
func (s *stubSite) mask(int, int, bool) matrix.Mask          { return matrix.Mask{} }
func (s *stubSite) outputRows(int) (kernels.RowOps, []int32) { return s.ro, s.rows }
func (s *stubSite) clip(*matrix.Dense)                       { s.clipped++ }

func (s *stubSite) aggregate(_ *cache, _ int, out *matrix.Dense, own ownRows, _ *matrix.Dense, _ matrix.Mask) error {
	s.be.Copy(out, own.rows)
	return nil
}

// TestLayersRunOnASite runs a GCN's layers against a site alone, with
// Â = I: on ÂX and transforming first (layer 1 on X), Z = XW forward and
// ∇W = Xᵀg backward; aggregating first (on H), Z = HW, ∇W = Hᵀg and
// ∂H = gWᵀ, computed at the restricted rows alone where the site names
// some. Each gradient that travels is clipped once.
func TestLayersRunOnASite(t *testing.T) {
	const n, din, dout = 5, 3, 2
	x, w, g := matrix.NewDense(n, din), matrix.NewDense(din, dout), matrix.NewDense(n, dout)
	for i := range x.Data {
		x.Data[i] = float32(i%7) - 3
	}
	for i := range w.Data {
		w.Data[i] = 0.5 * float32(i+1)
	}
	for i := range g.Data {
		g.Data[i] = float32(i%3) - 1
	}
	be := kernels.CPU{}
	in, err := be.Input(kernels.NewDenseOperand(x))
	if err != nil {
		t.Fatal(err)
	}
	ro, _ := kernels.RowsOf(be)
	c := func() conv {
		return conv{din: din, dout: dout, last: true, z: be.NewDense(n, dout), dW: be.NewDense(din, dout)}
	}
	aggregating := func() layer {
		return &aggregateLayer{conv: c(), t: be.NewDense(n, din), dT: be.NewDense(n, din), dIn: be.NewDense(n, din)}
	}
	for _, tc := range []struct {
		L     layer
		rows  []int32 // nil: every row
		clips int
	}{
		{&localLayer{conv: c()}, nil, 0},
		{&transformLayer{conv: c(), first: true, u: be.NewDense(n, dout), dU: be.NewDense(n, dout)}, nil, 1},
		{aggregating(), nil, 1},
		{aggregating(), []int32{1, 3}, 1},
	} {
		name := tc.L.kind()
		at := func(i int) bool { return tc.rows == nil || slices.Contains(tc.rows, int32(i)) }
		s := &stubSite{be: be, x: in, w: w, rows: tc.rows}
		if tc.rows != nil {
			s.ro, name = ro, name+" at rows"
		}
		out, err := tc.L.forward(s, pass{train: true}, act{h: x})
		if err != nil {
			t.Fatalf("%s forward: %v", name, err)
		}
		dIn, err := tc.L.backward(s, 0, g)
		if err != nil {
			t.Fatalf("%s backward: %v", name, err)
		}
		near(t, name+": Z", out.h, func(i, j int) (v float64) {
			for k := range din {
				v += float64(x.Data[i*din+k] * w.Data[k*dout+j])
			}
			return v
		}, at)
		near(t, name+": ∇W", tc.L.base().dW, func(k, j int) (v float64) {
			for i := range n {
				if at(i) {
					v += float64(x.Data[i*din+k] * g.Data[i*dout+j])
				}
			}
			return v
		}, nil)
		if dIn != nil {
			near(t, name+": ∂H", dIn, func(i, k int) (v float64) {
				for j := range dout {
					v += float64(g.Data[i*dout+j] * w.Data[k*dout+j])
				}
				return v
			}, at)
		}
		if s.clipped != tc.clips {
			t.Errorf("%s: clipped %d gradient blocks, want %d", name, s.clipped, tc.clips)
		}
	}
}

// near checks got against want at the rows computed (at; nil: all),
// and that the other rows stayed zero.
func near(t *testing.T, what string, got *matrix.Dense, want func(i, j int) float64, at func(i int) bool) {
	t.Helper()
	for i := range got.Rows {
		for j := range got.Cols {
			w := 0.0
			if at == nil || at(i) {
				w = want(i, j)
			}
			if v := float64(got.Data[i*got.Cols+j]); math.Abs(v-w) > 1e-4*(1+math.Abs(w)) {
				t.Fatalf("%s[%d,%d] = %g, want %g", what, i, j, v, w)
			}
		}
	}
}

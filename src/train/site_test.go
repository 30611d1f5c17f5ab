package train

import (
	"math"
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
	clipped int
}

func (s *stubSite) backend() kernels.Backend                 { return s.be }
func (s *stubSite) operand() kernels.Input                   { return s.x }
func (s *stubSite) weights(int) weights                      { return weights{W: s.w, B: make([]float32, s.w.Cols)} }
func (s *stubSite) mask(int, int, bool) matrix.Mask          { return matrix.Mask{} }
func (s *stubSite) outputRows(int) (kernels.RowOps, []int32) { return nil, nil }
func (s *stubSite) clip(*matrix.Dense)                       { s.clipped++ }

func (s *stubSite) aggregate(_ *cache, _ int, out *matrix.Dense, own ownRows, _ *matrix.Dense, _ matrix.Mask) error {
	s.be.Copy(out, own.rows)
	return nil
}

// TestLayersRunOnASite runs a GCN's first layer, on ÂX and transforming
// first, against a site alone: Z = XW forward, ∇W = Xᵀg backward, the
// gradient clipped once where it travels.
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
	c := func() conv {
		return conv{din: din, dout: dout, last: true, z: be.NewDense(n, dout), dW: be.NewDense(din, dout)}
	}
	for _, tc := range []struct {
		L     layer
		clips int
	}{
		{&localLayer{conv: c()}, 0},
		{&transformLayer{conv: c(), first: true, u: be.NewDense(n, dout), dU: be.NewDense(n, dout)}, 1},
	} {
		s := &stubSite{be: be, x: in, w: w}
		out, err := tc.L.forward(s, pass{}, act{})
		if err != nil {
			t.Fatalf("%s forward: %v", tc.L.kind(), err)
		}
		if _, err := tc.L.backward(s, 0, g); err != nil {
			t.Fatalf("%s backward: %v", tc.L.kind(), err)
		}
		near(t, tc.L.kind()+": Z", out.h, func(i, j int) (v float64) {
			for k := range din {
				v += float64(x.Data[i*din+k] * w.Data[k*dout+j])
			}
			return v
		})
		near(t, tc.L.kind()+": ∇W", tc.L.base().dW, func(k, j int) (v float64) {
			for i := range n {
				v += float64(x.Data[i*din+k] * g.Data[i*dout+j])
			}
			return v
		})
		if s.clipped != tc.clips {
			t.Errorf("%s: clipped %d gradient blocks, want %d", tc.L.kind(), s.clipped, tc.clips)
		}
	}
}

func near(t *testing.T, what string, got *matrix.Dense, want func(i, j int) float64) {
	t.Helper()
	for i := range got.Rows {
		for j := range got.Cols {
			if w, v := want(i, j), float64(got.Data[i*got.Cols+j]); math.Abs(v-w) > 1e-4*(1+math.Abs(w)) {
				t.Fatalf("%s[%d,%d] = %g, want %g", what, i, j, v, w)
			}
		}
	}
}

//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
)

// Every step of GAT's attention on the device against the CPU's, through
// one layer's forward over two column blocks (its own rows, then another
// rank's, which rescales the running softmax) and its backward, with and
// without attention dropout (the same masks, or nothing would match), on
// a hidden layer (heads side by side) and a last one (their mean).
func TestAttentionMatchesCPU(t *testing.T) {
	b := open(t)
	if !b.gat {
		t.Fatal("the module lacks the attention kernels")
	}
	var cpu kernels.CPU
	for _, tc := range []struct {
		h, f   int
		concat bool
		key    uint64
	}{{3, 5, false, 0}, {3, 6, false, 0x1234567}, {8, 8, true, 0}, {5, 6, true, 0x89abcdef}} {
		t.Run(fmt.Sprintf("%dx%d concat=%v key=%x", tc.h, tc.f, tc.concat, tc.key), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.h), tc.key))
			const rows, other = 700, 300
			h, f := tc.h, tc.f
			hf := h * f
			keep := float32(1)
			if tc.key != 0 {
				keep = 0.6
			}
			dev := func(d *matrix.Dense) *matrix.Dense { return onDevice(b, d) }
			state := func(newDense func(r, c int) *matrix.Dense) kernels.GATState {
				return kernels.GATState{El: newDense(rows, h), M: newDense(rows, h), S: newDense(rows, h),
					O: newDense(rows, hf), O2: newDense(rows, hf), C: newDense(rows, h)}
			}
			ids := make([]int64, rows)
			for i := range ids {
				ids[i] = 1000 + 3*int64(i)
			}
			own := randCSR(r, rows, rows, 6)
			blocks := []*kernels.GATBlock{
				{A: own, H: h, F: f, Key: tc.key, Keep: keep, RowIDs: ids, ColIDs: ids},
				{A: randCSR(r, rows, other, 4), H: h, F: f, Key: tc.key, Keep: keep, RowIDs: ids, ColID0: 50000},
			}
			back := &kernels.GATBlock{A: own.Transpose(), H: h, F: f, Key: tc.key, Keep: keep, RowIDs: ids, ColIDs: ids}
			u, al, ar := randDense(r, rows, hf), randDense(r, 1, hf), randDense(r, 1, hf)
			theirs := randDense(r, other, hf+h)
			zc := f
			if tc.concat {
				zc = hf
			}
			g := randDense(r, rows, zc)

			// The CPU's layer, then the device's, step by step.
			type run struct {
				pay, z, gpay, dEl, dEr, dU, dAl, dAr *matrix.Dense
				st                                   kernels.GATState
			}
			layer := func(at kernels.Attention, newDense func(r, c int) *matrix.Dense, in func(*matrix.Dense) *matrix.Dense) run {
				x := run{pay: newDense(rows, hf+h), z: newDense(rows, zc), gpay: newDense(rows, hf+3*h),
					dEl: newDense(rows, h), dEr: newDense(rows, h), dU: newDense(rows, hf),
					dAl: newDense(1, hf), dAr: newDense(1, hf), st: state(newDense)}
				du := in(u)
				at.GATPayload(x.pay, x.st.El, du, al, ar, h)
				at.GATStart(x.st)
				at.GATAttend(blocks[0], x.pay, x.st)
				at.GATAttend(blocks[1], in(theirs), x.st)
				at.GATFinish(x.z, x.st, h, tc.concat)
				at.GATGradRows(x.gpay, x.dEl, x.dEr, in(g), x.st, h, tc.concat)
				at.GATNeighbour(back, x.gpay, x.pay, x.dU, x.dEr)
				at.GATScoreGrads(x.dU, x.dAl, x.dAr, x.dEl, x.dEr, du, x.pay, al, ar, h)
				return x
			}
			want := layer(cpu, matrix.NewDense, func(d *matrix.Dense) *matrix.Dense { return d })
			got := layer(b, b.NewDense, dev)
			for _, c := range []struct {
				what      string
				got, want *matrix.Dense
			}{
				{"payload", got.pay, want.pay}, {"el", got.st.El, want.st.El}, {"maxima", got.st.M, want.st.M},
				{"sums", got.st.S, want.st.S}, {"outputs", got.st.O, want.st.O}, {"o2", got.st.O2, want.st.O2},
				{"c", got.st.C, want.st.C}, {"z", got.z, want.z}, {"gradient rows", got.gpay, want.gpay},
				{"∂el", got.dEl, want.dEl}, {"∂er", got.dEr, want.dEr}, {"∂U", got.dU, want.dU},
				{"∂a_l", got.dAl, want.dAl}, {"∂a_r", got.dAr, want.dAr},
			} {
				near(t, c.what, fetch(t, b, c.got), c.want.Data, 1e-4)
			}
			// A forward for prediction keeps no training sums.
			st, z := state(b.NewDense), b.NewDense(rows, zc)
			st.O2, st.C = nil, nil
			b.GATPayload(got.pay, st.El, dev(u), al, ar, h)
			b.GATStart(st)
			b.GATAttend(blocks[0], got.pay, st)
			b.GATAttend(blocks[1], dev(theirs), st)
			b.GATFinish(z, st, h, tc.concat)
			near(t, "z without the training sums", fetch(t, b, z), want.z.Data, 1e-4)
		})
	}
}

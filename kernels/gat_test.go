package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"sancus/collectives/wire"
	"sancus/kernels/matrix"
)

// TestGATKernels checks the CPU's attention, forward (running softmax,
// outputs and the target side's sums), neighbour side and score
// gradients, against a float64 reference written from the math in
// src/train/gat.go, for the shapes the kernels compile as constants (8
// heads of 8; one head) and any other, with and without attention
// dropout. make test runs it at every SIMD level.
func TestGATKernels(t *testing.T) {
	for _, tc := range []struct {
		h, f    int
		key     uint64
		density float64 // 0.3: rows of about 90 edges, over several chunks (0.9: one head's too)
	}{{8, 8, 0, 0.03}, {8, 8, 0xfeed, 0.03}, {8, 8, 0xfeed, 0.3}, {1, 16, 0, 0.03}, {1, 16, 0xbeef, 0.3},
		{1, 16, 0xbeef, 0.9}, {1, 32, 0, 0.03}, {1, 64, 0xbeef, 0.03}, {1, 7, 0xbeef, 0.03}, {3, 5, 0x1234, 0.03},
		{2, 16, 0, 0.03}} {
		t.Run(fmt.Sprintf("%dx%d-key%x-d%g", tc.h, tc.f, tc.key, tc.density), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.h*100+tc.f), tc.key))
			const n = 300
			h, f := tc.h, tc.f
			hf := h * f
			keep := float32(1)
			if tc.key != 0 {
				keep = 0.6
			}
			a := randCSR(r, n, n, tc.density)
			rows := make([]bool, n)
			for i := range rows {
				rows[i] = i != 5 // a row no edge reaches: its outputs are zero
			}
			a = a.Keep(rows, nil)
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = 7 + 5*int64(i)
			}
			blk := &GATBlock{A: a, H: h, F: f, Key: tc.key, Keep: keep, RowIDs: ids, ColIDs: ids}
			src, el := randDense(r, n, hf+h), randDense(r, n, h)
			st := GATState{El: el, M: matrix.NewDense(n, h), S: matrix.NewDense(n, h),
				O: matrix.NewDense(n, hf), O2: matrix.NewDense(n, hf), C: matrix.NewDense(n, h)}
			var cpu CPU
			// What a layer's state holds from its last pass: GATStart
			// empties it, a row no edge reaches too.
			for _, d := range []*matrix.Dense{st.O, st.O2, st.C} {
				for i := range d.Data {
					d.Data[i] = float32(math.NaN())
				}
			}
			cpu.GATStart(st)
			cpu.GATAttend(blk, src, st)

			// scale is edge (target i, source j)'s dropout scale in head k.
			thr := uint32((1-keep)*65536 + 0.5)
			scale := func(i, j, k int) float64 {
				if tc.key == 0 {
					return 1
				}
				z := wire.SeedOf(uint64(k>>2), wire.Seed(tc.key^uint64(ids[i]), uint64(ids[j])))
				if uint32(z>>(16*(k&3))&0xffff) < thr {
					return 0
				}
				return 1 / float64(keep)
			}
			leaky := func(v float64) (float64, float64) {
				if v < 0 {
					return 0.2 * v, 0.2
				}
				return v, 1
			}
			m, s, c := matrix.NewDense(n, h), matrix.NewDense(n, h), matrix.NewDense(n, h)
			o, o2 := matrix.NewDense(n, hf), matrix.NewDense(n, hf)
			for i := range n {
				for k := range h {
					mx := math.Inf(-1)
					for p := a.RowPtr[i]; p < a.RowPtr[i+1]; p++ {
						x, _ := leaky(float64(at(el, i, k) + at(src, int(a.ColIdx[p]), hf+k)))
						mx = max(mx, x)
					}
					var sum, cs float64
					ok, o2k := make([]float64, f), make([]float64, f)
					for p := a.RowPtr[i]; p < a.RowPtr[i+1]; p++ {
						j := int(a.ColIdx[p])
						x, sl := leaky(float64(at(el, i, k) + at(src, j, hf+k)))
						e := math.Exp(x - mx)
						sum, cs = sum+e, cs+e*sl
						for t := range f {
							u := float64(at(src, j, k*f+t))
							ok[t] += e * scale(i, j, k) * u
							o2k[t] += e * scale(i, j, k) * sl * u
						}
					}
					if a.RowPtr[i] < a.RowPtr[i+1] {
						set(m, i, k, float32(mx))
					}
					set(s, i, k, float32(sum))
					set(c, i, k, float32(cs))
					for t := range f {
						set(o, i, k*f+t, float32(ok[t]))
						set(o2, i, k*f+t, float32(o2k[t]))
					}
				}
			}
			for _, x := range []struct {
				name      string
				got, want *matrix.Dense
			}{{"running maxima", st.M, m}, {"sums", st.S, s}, {"outputs", st.O, o}, {"slope-weighted outputs", st.O2, o2}, {"slope-weighted sums", st.C, c}} {
				got := x.got
				if x.name != "sums" { // rows no edge reaches: maxima −∞, the rest as GATFinish leaves them
					got = emptied(x.got, a)
				}
				assertSum(t, x.name, got, x.want, 20)
			}

			// The finished outputs and the gradient rows, for a hidden layer
			// (heads side by side) and a last one (their mean).
			for _, concat := range []bool{true, false} {
				zc := f
				if concat {
					zc = hf
				}
				fin := GATState{El: st.El, M: st.M, S: st.S, O: matrix.NewDense(n, hf), O2: st.O2, C: st.C}
				copy(fin.O.Data, st.O.Data)
				z, gz := matrix.NewDense(n, zc), randDense(r, n, zc)
				cpu.GATFinish(z, fin, h, concat)
				gpay, dEl, dEr := matrix.NewDense(n, hf+3*h), matrix.NewDense(n, h), randDense(r, n, h)
				cpu.GATGradRows(gpay, dEl, dEr, gz, fin, h, concat)
				wz, wg, wdEl := matrix.NewDense(n, zc), matrix.NewDense(n, hf+3*h), matrix.NewDense(n, h)
				for i := range n {
					for k := range h {
						sk := float64(at(s, i, k))
						var delta, d2 float64
						for t := range f {
							ot := float64(at(o, i, k*f+t))
							if sk > 0 {
								ot /= sk
							}
							gt := float64(at(gz, i, k*f%zc+t)) // a mean's share is 1/h of its gradient
							if concat {
								wz.Data[i*zc+k*f+t] = float32(ot)
							} else {
								wz.Data[i*zc+t] += float32(ot / float64(h))
								gt /= float64(h)
							}
							set(wg, i, k*f+t, float32(gt))
							delta += gt * ot
							d2 += gt * float64(at(o2, i, k*f+t))
						}
						lse := math.Inf(-1)
						if sk > 0 {
							lse = float64(at(m, i, k)) + math.Log(sk)
							set(wdEl, i, k, float32((d2-delta*float64(at(c, i, k)))/sk))
						}
						set(wg, i, hf+k, at(el, i, k))
						set(wg, i, hf+h+k, float32(lse))
						set(wg, i, hf+2*h+k, float32(delta))
					}
				}
				assertSum(t, fmt.Sprintf("outputs (concat %v)", concat), z, wz, h)
				assertSum(t, fmt.Sprintf("gradient rows (concat %v)", concat), gpay, wg, 2*f)
				assertSum(t, fmt.Sprintf("target side (concat %v)", concat), dEl, wdEl, 4*f)
				for _, v := range dEr.Data {
					if v != 0 {
						t.Fatalf("∂er not emptied for the neighbour side: %g", v)
					}
				}
			}

			// The payload: [U | a_r·U] and a_l·U.
			pu, pal, par := randDense(r, n, hf), randDense(r, 1, hf), randDense(r, 1, hf)
			pay, pel := matrix.NewDense(n, hf+h), matrix.NewDense(n, h)
			cpu.GATPayload(pay, pel, pu, pal, par, h)
			wpay, wel := matrix.NewDense(n, hf+h), matrix.NewDense(n, h)
			for i := range n {
				copy(wpay.Data[i*(hf+h):], pu.Data[i*hf:(i+1)*hf])
				for k := range h {
					var dr, dl float64
					for t := k * f; t < (k+1)*f; t++ {
						dr += float64(at(pu, i, t) * par.Data[t])
						dl += float64(at(pu, i, t) * pal.Data[t])
					}
					set(wpay, i, hf+k, float32(dr))
					set(wel, i, k, float32(dl))
				}
			}
			assertSum(t, "payload", pay, wpay, f)
			assertSum(t, "target scores", pel, wel, f)

			// The neighbour side: rows of the block are sources, its columns
			// the targets whose gradient rows [G | el | lse | δ] arrived.
			g := randDense(r, n, hf+3*h)
			for i := range n {
				for k := range h {
					set(g, i, hf+h+k, float32(math.Abs(float64(at(g, i, hf+h+k))))+1) // lse above every score's scale
				}
			}
			dU, dEr := matrix.NewDense(n, hf), matrix.NewDense(n, h)
			back := &GATBlock{A: a, H: h, F: f, Key: tc.key, Keep: keep, RowIDs: ids, ColIDs: ids}
			cpu.GATNeighbour(back, g, src, dU, dEr)
			wdU, wdEr := matrix.NewDense(n, hf), matrix.NewDense(n, h)
			for j := range n { // source j, target i
				for p := a.RowPtr[j]; p < a.RowPtr[j+1]; p++ {
					i := int(a.ColIdx[p])
					for k := range h {
						x, sl := leaky(float64(at(g, i, hf+k) + at(src, j, hf+k)))
						al := math.Exp(x - float64(at(g, i, hf+h+k)))
						d := scale(i, j, k)
						var gu float64
						for t := range f {
							gk := float64(at(g, i, k*f+t))
							wdU.Data[j*hf+k*f+t] += float32(d * al * gk)
							gu += gk * float64(at(src, j, k*f+t))
						}
						wdEr.Data[j*h+k] += float32(al * (d*gu - float64(at(g, i, hf+2*h+k))) * sl)
					}
				}
			}
			assertSum(t, "neighbours' ∂U", dU, wdU, 20*f)
			assertSum(t, "neighbours' ∂er", dEr, wdEr, 20*f)

			// The score gradients into ∂U and the attention vectors.
			dEl, al, ar := randDense(r, n, h), randDense(r, 1, hf), randDense(r, 1, hf)
			u := randDense(r, n, hf)
			dU2 := randDense(r, n, hf)
			wdU2, wdAl, wdAr := matrix.NewDense(n, hf), matrix.NewDense(1, hf), matrix.NewDense(1, hf)
			for i := range n {
				for x := range hf {
					k := x / f
					wdU2.Data[i*hf+x] = dU2.Data[i*hf+x] + at(dEl, i, k)*al.Data[x] + at(dEr, i, k)*ar.Data[x]
					wdAl.Data[x] += at(dEl, i, k) * at(u, i, x)
					wdAr.Data[x] += at(dEr, i, k) * at(src, i, x)
				}
			}
			dAl, dAr := matrix.NewDense(1, hf), matrix.NewDense(1, hf)
			cpu.GATScoreGrads(dU2, dAl, dAr, dEl, dEr, u, src, al, ar, h)
			assertSum(t, "∂U with the score gradients", dU2, wdU2, 2)
			assertSum(t, "∂a_l", dAl, wdAl, n)
			assertSum(t, "∂a_r", dAr, wdAr, n)
		})
	}
}

// emptied is a copy of m with the rows that have no edges in a zeroed.
func emptied(m *matrix.Dense, a *matrix.CSR) *matrix.Dense {
	m = m.Clone()
	for i := range m.Rows {
		if a.RowPtr[i] == a.RowPtr[i+1] {
			for k := range m.Cols {
				set(m, i, k, 0)
			}
		}
	}
	return m
}

func at(d *matrix.Dense, i, j int) float32 { return d.Data[i*d.Cols+j] }

func set(d *matrix.Dense, i, j int, v float32) { d.Data[i*d.Cols+j] = v }

package kernels

// Dropout masks are a pure function of (seed, stream, global row, column):
// no state, nothing stored for the backward pass, and the same mask whatever
// the number of ranks or threads. That is what lets a P-rank run reproduce
// the 1-rank run exactly.

// Mask identifies one dropout application: a seed, a stream (epoch and layer)
// and the global id of the first local row.
type Mask struct {
	P      float32 // drop probability; 0 disables
	Seed   uint64
	Stream uint64
	Row0   int // global row of local row 0
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// keepWord returns 64 random bits covering columns 4q..4q+3 of a row, 16 bits each.
func (m Mask) keepWord(row, q int) uint64 {
	return mix64(m.Seed ^ mix64(m.Stream^mix64(uint64(row)<<20^uint64(q))))
}

func (m Mask) threshold() uint64 { return uint64(float64(m.P) * 65536) }

// Keep reports whether element (local row r, column c) survives.
func (m Mask) Keep(r, c int) bool {
	w := m.keepWord(m.Row0+r, c>>2)
	return (w>>(16*uint(c&3)))&0xffff >= m.threshold()
}

// ApplyDense sets dst = src ⊙ mask / (1−p). dst may alias src.
func (m Mask) ApplyDense(dst, src *Dense) {
	if m.P <= 0 {
		if dst != src {
			copy(dst.Data, src.Data)
		}
		return
	}
	thr := m.threshold()
	scale := float32(1 / (1 - float64(m.P)))
	n := src.Cols
	forRanges(evenCuts(src.Rows, threads, 1024), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			s, d := src.Data[r*n:(r+1)*n], dst.Data[r*n:(r+1)*n]
			for q := 0; q*4 < n; q++ {
				w := m.keepWord(m.Row0+r, q)
				for l := 0; l < 4 && q*4+l < n; l++ {
					c := q*4 + l
					if (w>>(16*uint(l)))&0xffff >= thr {
						d[c] = s[c] * scale
					} else {
						d[c] = 0
					}
				}
			}
		}
	})
}

// ApplyCSR writes into vals the values of a with the mask applied (same
// sparsity structure; dropped entries become 0).
func (m Mask) ApplyCSR(vals []float32, a *CSR) {
	if m.P <= 0 {
		copy(vals, a.Val)
		return
	}
	thr := m.threshold()
	scale := float32(1 / (1 - float64(m.P)))
	forRanges(nnzCuts(a.RowPtr, threads), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
				c := int(a.ColIdx[p])
				w := m.keepWord(m.Row0+r, c>>2)
				if (w>>(16*uint(c&3)))&0xffff >= thr {
					vals[p] = a.Val[p] * scale
				} else {
					vals[p] = 0
				}
			}
		}
	})
}

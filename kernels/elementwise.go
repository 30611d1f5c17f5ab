package kernels

import "math"

// AddBiasReLU adds bias to every row of z and, if relu is set, clamps at 0,
// in one pass (z becomes the layer output).
func AddBiasReLU(z *Dense, bias []float32, relu bool) {
	n := z.Cols
	forRanges(evenCuts(z.Rows, threads, 2048), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := z.Data[r*n : (r+1)*n]
			for c := range row {
				v := row[c] + bias[c]
				if relu && v < 0 {
					v = 0
				}
				row[c] = v
			}
		}
	})
}

// ReLUBackward zeroes g where the activation h was clamped (h ≤ 0).
func ReLUBackward(g, h *Dense) {
	forRanges(evenCuts(len(g.Data), threads, 1<<15), func(lo, hi int) {
		gd, hd := g.Data[lo:hi], h.Data[lo:hi]
		for i := range gd {
			if hd[i] <= 0 {
				gd[i] = 0
			}
		}
	})
}

// ColumnSums adds every row of g into out (len g.Cols): a bias gradient.
func ColumnSums(out []float32, g *Dense) {
	clear(out)
	for r := 0; r < g.Rows; r++ {
		row := g.Row(r)
		for c, v := range row {
			out[c] += v
		}
	}
}

// FrobNorm returns ‖x‖_F in float64.
func FrobNorm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// FrobDiff returns ‖a − b‖_F in float64.
func FrobDiff(a, b []float32) float64 {
	var s float64
	for i, v := range a {
		d := float64(v) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

// Scale multiplies x by s in place.
func Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

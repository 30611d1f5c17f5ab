package kernels

import (
	"math"
	"sancus/kernels/matrix"
)

// SoftmaxCE computes the summed cross-entropy over rows listed in mask and
// writes into grad (same shape as logits) d(loss)/d(logits) scaled by
// 1/norm; rows outside the mask get zero gradient. It also counts correct
// argmax predictions for each of the given row sets.
func SoftmaxCE(logits *matrix.Dense, labels []int32, mask []int32, norm float64, grad *matrix.Dense) (lossSum float64) {
	c := logits.Cols
	if grad != nil {
		grad.Zero()
	}
	p := make([]float64, c)
	for _, r := range mask {
		row := logits.Row(int(r))
		mx := math.Inf(-1)
		for _, v := range row {
			mx = max(mx, float64(v))
		}
		var s float64
		for k, v := range row {
			p[k] = math.Exp(float64(v) - mx)
			s += p[k]
		}
		y := int(labels[r])
		lossSum += -(float64(row[y]) - mx - math.Log(s))
		if grad != nil {
			g := grad.Row(int(r))
			for k := range g {
				q := p[k] / s
				if k == y {
					q -= 1
				}
				g[k] = float32(q / norm)
			}
		}
	}
	return lossSum
}

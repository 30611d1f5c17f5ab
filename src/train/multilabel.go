package train

// Multi-label training: one sigmoid per class and binary cross-entropy,
// averaged over training nodes and classes, as PyTorch's
// BCEWithLogitsLoss; the metric is micro-F1 (true and false positives and
// false negatives summed over nodes and classes, then over ranks).

import (
	"math"

	"sancus/kernels/matrix"
)

// bceLossGrad returns this rank's summed loss (over train rows, averaged
// over classes) and leaves ∂loss/∂logits in e.out.lossGrad.
func (e *Engine) bceLossGrad(logits *matrix.Dense) float64 {
	z, g := e.host(logits), e.lossGradBuf().Data
	clear(g)
	c := logits.Cols
	rows, n := e.trainRows()
	norm := float64(n) * float64(c)
	var sum float64
	y := make([]float32, c)
	for _, r := range rows {
		e.targets(int(r), y)
		for k := range c {
			v := float64(z[int(r)*c+k])
			sum += math.Max(v, 0) - v*float64(y[k]) + math.Log1p(math.Exp(-math.Abs(v)))
			g[int(r)*c+k] = float32((1/(1+math.Exp(-v)) - float64(y[k])) / norm)
		}
	}
	e.be.Upload(e.out.lossGrad)
	return sum / float64(c)
}

// targets writes row r's 0/1 labels into y.
func (e *Engine) targets(r int, y []float32) {
	clear(y)
	m := e.s.Multi
	for p := m.RowPtr[r]; p < m.RowPtr[r+1]; p++ {
		y[m.ColIdx[p]] = 1
	}
}

// f1Counts are true positives, false positives and false negatives of
// the rows in set (a class is predicted when its logit is positive).
func (e *Engine) f1Counts(logits *matrix.Dense, set []int32) (tp, fp, fn float64) {
	c := logits.Cols
	y := make([]float32, c)
	for _, r := range set {
		e.targets(int(r), y)
		for k, v := range logits.Row(int(r)) {
			switch pred := v > 0; {
			case pred && y[k] == 1:
				tp++
			case pred:
				fp++
			case y[k] == 1:
				fn++
			}
		}
	}
	return tp, fp, fn
}

// bceLoss is the summed validation loss of the rows in set.
func (e *Engine) bceLoss(logits *matrix.Dense, set []int32) float64 {
	c := logits.Cols
	y := make([]float32, c)
	var sum float64
	for _, r := range set {
		e.targets(int(r), y)
		for k, v32 := range logits.Row(int(r)) {
			v := float64(v32)
			sum += math.Max(v, 0) - v*float64(y[k]) + math.Log1p(math.Exp(-math.Abs(v)))
		}
	}
	return sum / float64(c)
}

func microF1(tp, fp, fn float64) float64 {
	if tp == 0 {
		return 0
	}
	return 2 * tp / (2*tp + fp + fn)
}

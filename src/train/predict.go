package train

import (
	"fmt"

	"sancus/kernels/matrix"
	"sancus/src/model"
)

// SetParams replaces the model's parameters (a saved model's, in Flat
// order), checking every tensor's size.
func (e *Engine) SetParams(params [][]float32) error {
	flat := e.m.Flat()
	if len(params) != len(flat) {
		return fmt.Errorf("%d parameter tensors for a model of %d", len(params), len(flat))
	}
	for i := range flat {
		if len(params[i]) != len(flat[i]) {
			return fmt.Errorf("parameter tensor %d has %d values, the model needs %d", i, len(params[i]), len(flat[i]))
		}
		copy(flat[i], params[i])
	}
	return nil
}

// Predict is full-graph inference across the ranks: the evaluation forward
// pass (no dropout, every block fresh) with the current parameters. It
// returns this rank's logits and, when the model has a hidden layer, the
// last hidden layer's activations (on the host; both alias the engine's
// buffers until its next pass). layerDone, if set, hears as each layer is
// done.
func (e *Engine) Predict(layerDone func(done, layers int)) (logits, hidden *matrix.Dense, err error) {
	if logits, err = e.forwardReporting(0, false, layerDone); err != nil {
		return nil, nil, err
	}
	if layerDone != nil {
		layerDone(len(e.layers), len(e.layers))
	}
	e.be.Download(logits)
	if n := len(e.layers); n > 1 {
		hidden = e.layers[n-2].base().z
		e.be.Download(hidden)
	}
	return logits, hidden, nil
}

// Argmax is each row's predicted class.
func Argmax(logits *matrix.Dense) []int32 {
	out := make([]int32, logits.Rows)
	for r := range out {
		row := logits.Row(r)
		best := 0
		for k, v := range row {
			if v > row[best] {
				best = k
			}
		}
		out[r] = int32(best)
	}
	return out
}

// Model is the engine's model (its parameters are the engine's own).
func (e *Engine) Model() *model.GCN { return e.m }

// TestAccuracy is the test metric over every rank: accuracy, or micro-F1
// for a multi-label graph.
func (e *Engine) TestAccuracy(logits *matrix.Dense) (float64, error) {
	m := metrics{testOK: float64(model.Correct(logits, e.s.Labels, e.s.Test)), test: float64(len(e.s.Test))}
	if e.s.Multi != nil {
		m.f1[6], m.f1[7], m.f1[8] = e.f1Counts(logits, e.s.Test)
	}
	if err := e.sum(&m); err != nil {
		return 0, err
	}
	if e.s.Multi != nil {
		return microF1(m.f1[6], m.f1[7], m.f1[8]), nil
	}
	return ratio(m.testOK, m.test), nil
}

// LabelSets is each row's predicted classes (positive logits), as a rows ×
// classes 0/1 matrix.
func LabelSets(logits *matrix.Dense) []byte {
	out := make([]byte, logits.Rows*logits.Cols)
	for i, v := range logits.Data[:len(out)] {
		if v > 0 {
			out[i] = 1
		}
	}
	return out
}

// NodeIDs is the original node id of each of this rank's rows.
func (e *Engine) NodeIDs() []int64 {
	ids := make([]int64, e.rows())
	for r := range ids {
		ids[r] = e.ownID(r)
	}
	return ids
}

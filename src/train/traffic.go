package train

import (
	"fmt"

	"sancus/collectives/wire"
	"sancus/src/model"
	"sancus/src/shard"
	"sancus/src/staleness"
)

// The traffic a training epoch makes under the sparse exchange, stated
// from the rules newLayer, restrictOutput and reducesGradients apply, so
// that a planner counts rows from a partition without building an engine.
// It assumes every root sends every epoch (the none policy's traffic; a
// staleness policy only skips some of it) and global-batch training.

// RowSet says which of a root's rows travel to a rank in one flow.
type RowSet uint8

const (
	// ViewRows: the rows of root j that rank i's block Â_ij references,
	// or all of j's rows where they are WholeBlockShare percent or more.
	ViewRows RowSet = iota
	// ReadByTraining: the rows of j that Â_ij references at rank i's
	// training rows (the restricted last layer's forward).
	ReadByTraining
	// TrainingRows: j's training rows that Â_ij references (the
	// restricted last layer's backward).
	TrainingRows
)

func (s RowSet) String() string {
	return [...]string{"view", "read-by-training", "training"}[s]
}

// Flow is one exchange of an epoch: root j sends rank i the rows of Rows
// (Reverse: rank i sends root j the rows of j it holds, as a reduction
// does), RowBytes to a row on the wire.
type Flow struct {
	Layer    int    `json:"layer"` // 0-based
	Name     string `json:"name"`  // forward, gradient or reduction
	Width    int    `json:"width"` // values to a row
	RowBytes int    `json:"row_bytes"`
	Rows     RowSet `json:"-"`
	Reverse  bool   `json:"reverse,omitempty"`
	// Exact is false where the flow's bytes are an estimate: a GAT's
	// broadcast gradients (their bf16 tail).
	Exact bool `json:"exact"`
}

// WholeBlockShare is the percentage of a root's rows past which a rank
// asks for all of them (the sparse exchange's rule).
func WholeBlockShare() int { return wholeBlockShare }

// Flows lists the exchanges of one training epoch for a model on features
// input columns and classes outputs, at P > 1 ranks.
func (c Config) Flows(features, classes int) ([]Flow, error) {
	if _, err := resolve(c, 2); err != nil {
		return nil, err
	}
	if c.Exchange.Dense || c.Batch.Mode != BatchGlobal {
		return nil, fmt.Errorf("flows are stated for the sparse exchange in global-batch training: drop --dense-bcast and --batch")
	}
	fwd, grad := c.Wire.Fwd.Or(wire.FP32), c.Wire.Grad.Or(c.Wire.Fwd).Or(wire.FP32)
	if fwd.IsAuto() || grad.IsAuto() {
		return nil, fmt.Errorf("--wire auto picks a width per block as training goes: name a width (fp32, bf16, int8, int4, int2) to count bytes")
	}
	dims, heads := c.Model.widths(features, classes)
	agg := c.Precomputed()
	// The last layer moves only the rows training reads, where its rows
	// travel as asked and afresh (restrictOutput).
	restricted := !c.Exchange.FullOutput && !c.Wire.Delta && !c.Wire.CacheBits
	var out []Flow
	add := func(l int, name string, width, rowBytes int, rows RowSet, reverse, exact bool) {
		out = append(out, Flow{Layer: l, Name: name, Width: width, RowBytes: rowBytes, Rows: rows, Reverse: reverse, Exact: exact})
	}
	for l := 0; l < c.Model.Layers; l++ {
		din, dout := dims[l], dims[l+1]
		last := l == c.Model.Layers-1
		fr, gr := ViewRows, ViewRows
		if last && restricted {
			fr, gr = ReadByTraining, TrainingRows
		}
		switch arch := c.Model.Arch; {
		case l == 0 && agg == shard.Mean:
		case arch.HasRoot():
			add(l, "forward", dout, wire.RowBytes(fwd.Bits(), dout), fr, false, true)
			add(l, "gradient", dout, wire.RowBytes(grad.Bits(), dout), gr, false, true)
		case arch.Attends():
			h := heads[l]
			hf := dout // heads × features per head
			add(l, "forward", hf+h, wire.RowBytes(fwd.Bits(), hf+h), ViewRows, false, true)
			if !c.Wire.Delta && (!c.Staleness.SkipGradients || c.Staleness.Policy == staleness.KindNone) { // reducesGradients
				// Reduced: ∂U and ∂er go back along the forward's rows, each
				// matrix with its own row scale.
				add(l, "reduction", hf+h, wire.RowBytes(grad.Bits(), hf)+wire.RowBytes(grad.Bits(), h), ViewRows, true, true)
			} else {
				add(l, "gradient", hf+3*h, wire.RowBytes(grad.Bits(), hf)+6*h, ViewRows, false, false)
			}
		case l == 0 && agg == shard.Sym:
		case l == 0 || din > dout:
			add(l, "forward", dout, wire.RowBytes(fwd.Bits(), dout), fr, false, true)
			add(l, "gradient", dout, wire.RowBytes(grad.Bits(), dout), gr, false, true)
		default:
			add(l, "forward", din, wire.RowBytes(fwd.Bits(), din), fr, false, true)
			add(l, "gradient", din, wire.RowBytes(grad.Bits(), din), gr, false, true)
		}
	}
	return out, nil
}

// ParamCount is the number of parameters the model has (what the
// gradient allreduce sums every step).
func (c Config) ParamCount(features, classes int) (int, error) {
	dims, heads := c.Model.widths(features, classes)
	m, err := model.New(c.Model.Arch, dims, heads, c.Optim.Seed)
	if err != nil {
		return 0, err
	}
	return m.NumParams(), nil
}

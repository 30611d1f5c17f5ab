package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/graph"
)

// TestSampledDriftTracksWholeBlock: the drift variation-gap measures on its
// row sample is within 5% of the drift of the whole block, for noise-free
// embeddings ReLU(ÂX·W) of a 60k-node generated graph whose weights moved by
// 1% to 10%, as they do between broadcasts.
func TestSampledDriftTracksWholeBlock(t *testing.T) {
	ds, err := generate(t.TempDir(), graph.GenConfig{Model: "planted", Nodes: 60000, Edges: 300000, Features: 64, FeatureNNZ: 8,
		Classes: 8, PIn: 0.5, FeatureSig: 0.4, TrainFrac: 0.1, ValFrac: 0.1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	ax := matrix.NewDense(ds.N, ds.Features.Cols)
	if err := kernels.SpMM(ax, graph.Normalize(ds.Adj), ds.Features.ToDense(), false); err != nil {
		t.Fatal(err)
	}
	rows := driftSampleRows(ds.N)
	if len(rows) >= ds.N/2 {
		t.Fatalf("sample of %d rows out of %d: not a sample", len(rows), ds.N)
	}
	r := rand.New(rand.NewPCG(1, 2))
	w := matrix.NewDense(ax.Cols, 16)
	for i := range w.Data {
		w.Data[i] = float32(r.NormFloat64())
	}
	embed := func(w *matrix.Dense) *matrix.Dense {
		h := matrix.NewDense(ds.N, 16)
		if err := kernels.GEMM(h, ax, w, false); err != nil {
			t.Fatal(err)
		}
		kernels.AddBiasReLU(h, make([]float32, 16), true)
		return h
	}
	at := func(h *matrix.Dense) []float32 {
		out := make([]float32, 0, len(rows)*16)
		for _, i := range rows {
			out = append(out, h.Row(int(i))...)
		}
		return out
	}
	last := embed(w)
	for _, step := range []float64{0.01, 0.03, 0.1} {
		moved := w.Clone()
		for i := range moved.Data {
			moved.Data[i] += float32(step * r.NormFloat64())
		}
		now := embed(moved)
		full, sampled := relDrift(now.Data, last.Data), relDrift(at(now), at(last))
		t.Logf("weights moved %.0f%%: drift %.4f, on %d sampled rows %.4f", 100*step, full, len(rows), sampled)
		if math.Abs(sampled/full-1) > 0.05 {
			t.Errorf("weights moved %.0f%%: sampled drift %.4f against the block's %.4f", 100*step, sampled, full)
		}
	}
}

// TestSampledGathersTheSampleRows: where a layer's input has no noise-free
// shadow, the drift reads the input's own rows at the sample, in order; a
// shadow, where there is one, is used as it is.
func TestSampledGathersTheSampleRows(t *testing.T) {
	e := &Engine{be: kernels.CPU{}, drift: drift{rows: driftSampleRows(5000)}}
	h := matrix.NewDense(5000, 5)
	for i := range h.Data {
		h.Data[i] = float32(i)
	}
	var buf *matrix.Dense
	got, err := e.sampled(act{h: h}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != len(e.drift.rows) || got.Cols != 5 {
		t.Fatalf("sampled %d×%d, want %d×5", got.Rows, got.Cols, len(e.drift.rows))
	}
	for i, r := range e.drift.rows {
		for j, v := range got.Row(i) {
			if want := h.Data[int(r)*5+j]; v != want {
				t.Fatalf("sample row %d (input row %d) column %d is %g, want %g", i, r, j, v, want)
			}
		}
	}
	if got, _ := e.sampled(act{h: h, clean: buf}, nil); got != buf {
		t.Fatal("a shadow was not used as it is")
	}
}

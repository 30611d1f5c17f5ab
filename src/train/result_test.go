package train

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/prepare"
	"sancus/src/result"
)

// TestSettingsReadConfig: a report reads what labels a run from the
// configuration the engine wrote, and from results written before the
// configuration was grouped.
func TestSettingsReadConfig(t *testing.T) {
	cfg := Defaults()
	cfg.Staleness.Policy, cfg.Staleness.Eps, cfg.Staleness.MaxStale = kind("variation-gap"), 0.03, 7
	cfg.Batch.Mode, cfg.Batch.ClustersPerStep, cfg.Wire.Fwd, cfg.Model.Arch = BatchClusters, 4, format("int4"), model.ArchSAGE
	cfg.Exchange.Dense = true
	b, err := json.Marshal(result.Run{Dataset: "d", Config: cfg, Result: &result.Result{Ranks: 2}})
	if err != nil {
		t.Fatal(err)
	}
	flat := []byte(`{"dataset": "d", "config": {"Model": "sage", "Staleness": "variation-gap", "Eps": 0.03, "MaxStale": 7,
		"Batch": "clusters", "ClustersPerStep": 4, "Wire": "int4", "DenseBcast": true, "Hidden": 16, "Seed": 1}, "result": {"ranks": 2}}`)
	want := result.Settings{Model: "sage", Staleness: "variation-gap", Eps: 0.03, MaxStale: 7, Batch: "clusters", ClustersPerStep: 4, Wire: "int4", Seed: 1, Exchange: "dense"}
	for name, js := range map[string][]byte{"grouped": b, "flat": flat} {
		var r result.Run
		if err := json.Unmarshal(js, &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Settings != want || r.Result.Ranks != 2 {
			t.Fatalf("%s: read back %+v, ranks %d; want %+v", name, r.Settings, r.Result.Ranks, want)
		}
	}
	var back Config
	var r result.Run
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.Config.(json.RawMessage), &back); err != nil || back.Model.Hidden != cfg.Model.Hidden {
		t.Fatalf("raw config: %v, hidden %d", err, back.Model.Hidden)
	}
}

// TestMessagesAreCounted: the results count point-to-point messages, per
// epoch and per rank, training apart from evaluation; one rank sends none.
func TestMessagesAreCounted(t *testing.T) {
	ds, _ := generated(t)
	for _, p := range []int{1, 3} {
		cfg := Defaults()
		cfg.Optim.Epochs = 4
		out, err := runPrepared(ds, p, cfg, prepare.Options{Precompute: cfg.Precomputed()})
		if err != nil {
			t.Fatal(err)
		}
		var curve int64
		for _, e := range out.Result.Curve {
			curve += e.Messages
			if p > 1 && e.Messages == 0 {
				t.Fatalf("P=%d: epoch %d sent no message", p, e.Epoch)
			}
		}
		r0 := out.Result.PerRank[0]
		if p == 1 && (curve != 0 || r0.Messages != 0 || r0.EvalMessages != 0) {
			t.Fatalf("one rank sent %d messages in its epochs, %d in all, %d evaluating", curve, r0.Messages, r0.EvalMessages)
		}
		if p > 1 && (curve > r0.Messages || r0.EvalMessages == 0) {
			t.Fatalf("P=%d: %d messages in the epochs, %d in training, %d evaluating", p, curve, r0.Messages, r0.EvalMessages)
		}
	}
}

// TestOccupiedRows: a block lists its rows with entries, and where their
// nonzeros start, however few are empty, and none where every row holds
// some; a block two caches multiply is listed once.
func TestOccupiedRows(t *testing.T) {
	sparse := &matrix.CSR{Rows: 5, Cols: 2, RowPtr: []int64{0, 0, 1, 1, 1, 2}, ColIdx: []int32{0, 1}, Val: []float32{1, 2}}
	half := &matrix.CSR{Rows: 2, Cols: 2, RowPtr: []int64{0, 1, 1}, ColIdx: []int32{0}, Val: []float32{1}}
	full := &matrix.CSR{Rows: 2, Cols: 2, RowPtr: []int64{0, 1, 2}, ColIdx: []int32{0, 1}, Val: []float32{1, 1}}
	seen := map[*matrix.CSR]kernels.OccupiedRows{}
	occ := occupiedRows([]*matrix.CSR{sparse, half, full}, seen)
	if fmt.Sprint(occ[0].Rows, occ[0].Ptr, occ[1].Rows, occ[1].Ptr) != "[1 4] [0 1 2] [0] [0 1]" || occ[2].Rows != nil {
		t.Fatalf("occupied rows %v, want rows [1 4] at nonzeros [0 1 2], [0] at [0 1], and none", occ)
	}
	if again := occupiedRows([]*matrix.CSR{sparse}, seen); &again[0].Rows[0] != &occ[0].Rows[0] {
		t.Fatal("a block seen before was listed again")
	}
}

// TestMemoryByComponent: the results split each rank's compulsory memory
// into graph, own rows, activations, caches, evaluation's caches, exchange
// buffers and model, which add up to it.
func TestMemoryByComponent(t *testing.T) {
	ds, _ := generated(t)
	for _, p := range []int{1, 2} {
		cfg := Defaults()
		cfg.Optim.Epochs = 2
		out, err := runPrepared(ds, p, cfg, prepare.Options{Precompute: cfg.Precomputed()})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Result.PerRank {
			m := r.Memory
			if sum := m.GraphMB + m.OwnMB + m.ActivationsMB + m.CachesMB + m.EvalMB + m.ExchangeMB + m.ModelMB; math.Abs(sum-r.CompulsoryMB) > 1e-6 || m.GraphMB <= 0 || m.ActivationsMB <= 0 || m.ModelMB <= 0 {
				t.Fatalf("P=%d rank %d: %+v sums to %g, compulsory %g", p, r.Rank, m, sum, r.CompulsoryMB)
			}
		}
	}
}

package charts

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"sancus/src/staleness"
	"strings"
	"testing"

	"sancus/src/graph"
	"sancus/src/prepare"
	"sancus/src/report"
	"sancus/src/result"
	"sancus/src/train"
)

// TestReportFromRuns: real run results become a CSV row each and PNGs that
// decode (the whole of sancus report), including a scaling plot for runs of one graph at several P.
func TestReportFromRuns(t *testing.T) {
	ds, err := graph.Load("../../../testdata/cora", graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, p := range []int{1, 2} {
		cfg := train.Defaults()
		cfg.Optim.Epochs, cfg.Staleness.Policy, cfg.Staleness.Eps = 6, staleness.KindEpochFixed, 1
		prep, err := prepare.InMemory(ds, p, prepare.Options{Precompute: cfg.Precomputed()})
		if err != nil {
			t.Fatal(err)
		}
		shards, err := prep.Shards()
		if err != nil {
			t.Fatal(err)
		}
		out, err := train.RunShards(shards, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(result.Run{Dataset: "cora", Nodes: ds.N, Config: cfg, Result: out.Result})
		os.WriteFile(filepath.Join(dir, "run"+string(rune('0'+p))+".json"), b, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "meta.json"), []byte(`{"parts": 2}`), 0o644) // not a run: skipped
	runs, err := report.Load(dir)
	if err != nil || len(runs) != 2 {
		t.Fatalf("loaded %d runs: %v", len(runs), err)
	}
	rows := report.Summarize(runs)
	if rows[1].MBSentPerEpoch <= 0 || rows[1].SkippedFraction != 0.5 || rows[0].MBSentPerEpoch != 0 {
		t.Fatalf("rows %+v %+v", rows[0], rows[1])
	}
	csv := filepath.Join(dir, "summary.csv")
	if err := report.WriteCSV(csv, rows); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(csv)
	if lines := strings.Count(string(b), "\n"); lines != 3 {
		t.Fatalf("summary.csv has %d lines:\n%s", lines, b)
	}
	pngs, err := Write(dir, runs)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pngs {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 300 {
			t.Fatalf("%s: %v", p, err)
		}
		names[filepath.Base(p)] = true
	}
	for _, want := range []string{"compute_vs_comm.png", "scaling.png", "accuracy.png", "accuracy_vs_time.png", "time_to_accuracy.png", "broadcasts_01.png"} {
		if !names[want] {
			t.Fatalf("missing %s in %v", want, pngs)
		}
	}
}

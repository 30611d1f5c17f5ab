package charts

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"

	"sancus/src/graph"
	"sancus/src/prepare"
	"sancus/src/report"
	"sancus/src/result"
	"sancus/src/staleness"
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
	for _, want := range []string{"compute_vs_comm.png", "scaling.png", "accuracy.png", "accuracy_vs_time.png", "time_to_accuracy.png", broadcastFiles(runs)[runs[1]]} {
		if !names[want] {
			t.Fatalf("missing %s in %v", want, pngs)
		}
	}
}

// settingsRun is a run of cora at P = 2 as Settings say, changed by f.
func settingsRun(f func(r *result.Run)) *result.Run {
	r := &result.Run{Dataset: "cora", Partitioner: "contiguous", Host: "h", Launcher: "none",
		Settings: result.Settings{Model: "gcn", Staleness: "none", Wire: "fp32", Exchange: "sparse", Batch: "global", Seed: 1},
		Result:   &result.Result{Ranks: 2, Curve: []result.Epoch{{Epoch: 1}}}}
	f(r)
	return r
}

// TestNamesTellRunsApart: a legend names each run by the columns in which
// it differs from the others (dataset, model, P, partitioner, wire,
// staleness, batch, seed), runs alike in all of them by their files, and
// the title carries what all share.
func TestNamesTellRunsApart(t *testing.T) {
	runs := []*result.Run{
		settingsRun(func(*result.Run) {}),
		settingsRun(func(r *result.Run) { r.Dataset = "citeseer-P2" }),
		settingsRun(func(r *result.Run) { r.Settings.Model = "sage" }),
		settingsRun(func(r *result.Run) { r.Result.Ranks = 4 }),
		settingsRun(func(r *result.Run) { r.Partitioner = "grem" }),
		settingsRun(func(r *result.Run) { r.Settings.Wire = "int2" }),
		settingsRun(func(r *result.Run) { r.Settings.Staleness, r.Settings.Eps = "variation-gap", 0.03 }),
		settingsRun(func(r *result.Run) { r.Settings.Batch, r.Settings.ClustersPerStep = "clusters", 10 }),
		settingsRun(func(r *result.Run) { r.Settings.Seed = 2 }),
		settingsRun(func(r *result.Run) { r.Path = "out/again-a.json" }),
		settingsRun(func(r *result.Run) { r.Path = "out/again-b.json" }),
		settingsRun(func(r *result.Run) { r.Dataset, r.Path = "polblogs", "a/run.json" }),
		settingsRun(func(r *result.Run) { r.Dataset, r.Path = "polblogs", "b/run.json" }),
	}
	names, shared := describe(runs)
	seen := map[string]int{}
	for i, r := range runs {
		if j, ok := seen[names[r]]; ok {
			t.Errorf("runs %d and %d both named %q", j, i, names[r])
		}
		seen[names[r]] = i
	}
	for i, want := range map[int]string{1: "citeseer", 2: "SAGE", 3: "P = 4", 4: "grem partition", 5: "int2 wire", 6: "variation-gap ε_H = 0.03",
		7: "10 clusters a step", 8: "seed 2", 9: "(again-a)", 10: "(again-b)", 11: "polblogs", 12: "polblogs"} {
		if !strings.Contains(names[runs[i]], want) {
			t.Errorf("run %d named %q, which does not say %q", i, names[runs[i]], want)
		}
	}
	if shared != "sparse rows" {
		t.Errorf("shared %q, want only the exchange, the one column all share", shared)
	}
}

// TestBroadcastFileNames: each run that skips broadcasts gets a chart
// named for the run (graph, ranks, policy), the same whatever other runs
// the report reads; runs alike get their files' names too; other runs
// none.
func TestBroadcastFileNames(t *testing.T) {
	vg := settingsRun(func(r *result.Run) { r.Settings.Staleness, r.Settings.Eps = "variation-gap", 0.03 })
	ef := settingsRun(func(r *result.Run) { r.Dataset, r.Settings.Staleness, r.Settings.Eps = "citeseer", "epoch-fixed", 1 })
	alone := settingsRun(func(r *result.Run) { r.Result.Ranks, r.Settings.Staleness = 1, "epoch-fixed" })
	plain := settingsRun(func(*result.Run) {})
	files := broadcastFiles([]*result.Run{vg, ef, alone, plain})
	if files[vg] != "broadcasts_cora_gcn_P2_contiguous_sparse_fp32_variation-gap-0.03_seed1.png" {
		t.Errorf("variation-gap run: %q", files[vg])
	}
	if !strings.HasPrefix(files[ef], "broadcasts_citeseer_") || !strings.Contains(files[ef], "_P2_") || !strings.Contains(files[ef], "epoch-fixed") {
		t.Errorf("epoch-fixed run: %q", files[ef])
	}
	if files[alone] != "" || files[plain] != "" {
		t.Errorf("runs that skip nothing got %q and %q", files[alone], files[plain])
	}
	if again := broadcastFiles([]*result.Run{plain, vg}); again[vg] != files[vg] {
		t.Errorf("name changed with the other runs: %q, then %q", files[vg], again[vg])
	}
	a, b := *vg, *vg
	a.Path, b.Path = "x/run-a.json", "x/run-b.json"
	twins := broadcastFiles([]*result.Run{&a, &b})
	if twins[&a] == twins[&b] || !strings.HasSuffix(twins[&a], "_run-a.png") {
		t.Errorf("alike runs: %q and %q", twins[&a], twins[&b])
	}
}

// TestNeighboursDrawnApart: series next to each other in a chart (runs
// loaded in order, alike runs side by side) differ in colour, dashes and
// marker, so that a curve drawn over another still shows.
func TestNeighboursDrawnApart(t *testing.T) {
	for i := 0; i < 40; i++ {
		c1, d1, g1 := lineStyle(i)
		c2, d2, g2 := lineStyle(i + 1)
		if c1 == c2 || slices.Equal(d1, d2) || g1 == g2 {
			t.Errorf("series %d and %d: %v %v %T, %v %v %T", i, i+1, c1, d1, g1, c2, d2, g2)
		}
	}
}

// TestWrapFitsTitles: a title line wider than the plot breaks after a
// comma where one fits, else a space, into lines each within the width,
// losing no word; a line that fits, and a word too long to break, stay.
func TestWrapFitsTitles(t *testing.T) {
	width := func(s string) vg.Length { return vg.Length(len(s)) } // one point a character
	got := wrap("Time per epoch\ncora, GCN, P = 2, variation-gap ε_H = 0.03, fp32 wire", 30, width)
	want := "Time per epoch\ncora, GCN, P = 2,\nvariation-gap ε_H = 0.03,\nfp32 wire"
	if got != want {
		t.Errorf("wrapped\n%s\nwant\n%s", got, want)
	}
	if got := wrap("a few words without commas in them", 12, width); got != "a few words\nwithout\ncommas in\nthem" {
		t.Errorf("wrapped at spaces:\n%s", got)
	}
	if got := wrap("unbreakable-word-longer-than-the-width", 10, width); got != "unbreakable-word-longer-than-the-width" {
		t.Errorf("long word: %q", got)
	}
}

// timedRun is a run of graph at P ranks on host h, t kernel threads a
// rank, ms a training step, reaching validation accuracy val.
func timedRun(graph string, p, t int, ms float64, val ...float64) *result.Run {
	r := settingsRun(func(r *result.Run) { r.Dataset, r.Result.Ranks, r.Result.Threads = graph, p, t })
	r.Result.Curve = nil
	for i, v := range val {
		r.Result.Curve = append(r.Result.Curve, result.Epoch{Epoch: i + 1, ValAcc: v, Ms: ms, Evaluated: true})
		r.Result.BestValAcc = max(r.Result.BestValAcc, v)
	}
	r.Result.MeanEpochMs = ms
	return r
}

// TestScalingSaysOversubscribed: repeated runs at one P still make a
// series, and the title names the P whose ranks outnumber the host's
// cores, and only that one.
func TestScalingSaysOversubscribed(t *testing.T) {
	runs := []*result.Run{timedRun("cora", 1, 2, 5, 0.8), timedRun("cora", 1, 2, 5, 0.8), timedRun("cora", 2, 1, 4, 0.8), timedRun("cora", 4, 1, 9, 0.8)}
	p, err := scaling(report.Summarize(runs))
	if err != nil || p == nil {
		t.Fatalf("no scaling chart: %v", err)
	}
	if !strings.Contains(p.Title.Text, "P = 4 oversubscribes host h: 4 ranks × 1 kernel thread each on 2 cores") || strings.Contains(p.Title.Text, "P = 2 over") {
		t.Errorf("title:\n%s", p.Title.Text)
	}
}

// TestTimeToAccuracyStatesTargets: the chart gives each graph's target,
// the same for all of its runs.
func TestTimeToAccuracyStatesTargets(t *testing.T) {
	runs := []*result.Run{timedRun("cora", 1, 2, 5, 0.5, 0.8), timedRun("cora-P2", 2, 1, 5, 0.6, 0.7), timedRun("planted", 1, 2, 5, 0.85, 0.9)}
	names, shared := describe(runs)
	p, err := timeToAccuracy(report.Summarize(runs), names, shared)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Title.Text, "99% of the best any run of the dataset reached (cora 0.792, planted 0.891)") {
		t.Errorf("title:\n%s", p.Title.Text)
	}
}

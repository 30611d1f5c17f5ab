package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sancus/src/result"
)

// TestRunsAreToldApart: runs that differ in any one of model, ranks,
// partitioner, exchange, wire, staleness, batch mode or seed get labels of
// their own, and the table has a column for each.
func TestRunsAreToldApart(t *testing.T) {
	base := result.Settings{Model: "gcn", Staleness: "none", Wire: "fp32", Exchange: "sparse", Batch: "global", Seed: 1}
	run := func(f func(r *result.Run)) *result.Run {
		r := &result.Run{Dataset: "cora", Partitioner: "contiguous", Settings: base, Result: &result.Result{Ranks: 2, Curve: []result.Epoch{{Epoch: 1}}}}
		f(r)
		return r
	}
	runs := []*result.Run{
		run(func(*result.Run) {}),
		run(func(r *result.Run) { r.Settings.Model = "sage" }),
		run(func(r *result.Run) { r.Result.Ranks = 4 }),
		run(func(r *result.Run) { r.Partitioner = "grem" }),
		run(func(r *result.Run) { r.Settings.Exchange = "dense" }),
		run(func(r *result.Run) { r.Settings.Wire = "int2" }),
		run(func(r *result.Run) { r.Settings.Staleness, r.Settings.Eps = "variation-gap", 0.03 }),
		run(func(r *result.Run) { r.Settings.Batch = "clusters" }),
		run(func(r *result.Run) { r.Settings.Seed = 2 }),
	}
	seen := map[string]int{}
	for i, r := range runs {
		l := Label(r)
		if j, ok := seen[l]; ok {
			t.Errorf("runs %d and %d share the label %q", j, i, l)
		}
		seen[l] = i
	}
	path := filepath.Join(t.TempDir(), "summary.csv")
	if err := WriteCSV(path, Summarize(runs)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	header, _, _ := strings.Cut(string(b), "\n")
	for _, col := range []string{"dataset", "model", "ranks", "partitioner", "exchange", "wire", "policy", "batch", "seed", "ms_per_epoch"} {
		if !strings.Contains(","+header+",", ","+col+",") {
			t.Errorf("summary.csv has no %s column: %s", col, header)
		}
	}
}

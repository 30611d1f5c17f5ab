package train

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"sancus/src/graph"
)

var (
	benchOnce sync.Once
	benchDS   *graph.Dataset
	benchErr  error
)

// benchGraph is the reference graph: 100k nodes, 1M undirected
// edges, 128 binary features, 16 classes, generated once per test binary.
func benchGraph(b *testing.B) *graph.Dataset {
	benchOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "sancus-bench-100k")
		if _, err := os.Stat(filepath.Join(dir, "test.txt")); err != nil {
			cfg := graph.GenConfig{Model: "planted", Nodes: 100000, Edges: 1000000, Features: 128, FeatureNNZ: 16,
				Classes: 16, PIn: 0.8, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1, Seed: 1}
			if benchErr = graph.Generate(dir, cfg); benchErr != nil {
				return
			}
		}
		benchDS, benchErr = graph.Load(dir, graph.LoadOptions{NormalizeFeatures: true})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDS
}

// BenchmarkEpoch100k reports ms per training epoch (forward, backward,
// Adam) on one rank, evaluation excluded.
func BenchmarkEpoch100k(b *testing.B) {
	ds := benchGraph(b)
	for _, pre := range []bool{true, false} {
		name := "precompute"
		if !pre {
			name = "plain"
		}
		b.Run(name, func(b *testing.B) {
			cfg := Defaults()
			cfg.Model.Precompute = pre
			cfg.Optim.Epochs = 20
			cfg.Run.EvalEvery = 0
			out, err := RunInProcess(ds, 1, cfg)
			res := out.Result
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.MeanEpochMs, "ms/epoch")
		})
	}
}

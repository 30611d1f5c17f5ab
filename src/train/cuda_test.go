//go:build cuda

package train

import (
	"math"
	"path/filepath"
	"testing"

	_ "sancus/collectives/nccl"
	_ "sancus/kernels/cuda"
	"sancus/src/graph"
)

// TestCUDAMatchesCPU trains the same runs on the CPU and on the GPU and
// compares every epoch's loss: one rank and two in-process ranks (both on
// the one GPU, with the sparsity-aware and the dense exchange), with and
// without the ÂX shortcut, on Cora and on a generated graph.
func TestCUDAMatchesCPU(t *testing.T) {
	cora, err := graph.Load(filepath.Join(testdata, "cora"), graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	planted, err := generate(t.TempDir(), graph.GenConfig{Model: "planted", Nodes: 20000, Edges: 200000, Features: 128, FeatureNNZ: 16,
		Classes: 16, PIn: 0.4, FeatureSig: 0.3, TrainFrac: 0.1, ValFrac: 0.1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ds   *graph.Dataset
		p    int
		edit func(*Config)
		gpu  func(*Config) // GPU run only
	}{
		{"cora/P1", cora, 1, func(c *Config) {}, nil},
		{"cora/P1/plain", cora, 1, func(c *Config) { c.Model.Precompute = false }, nil},
		{"cora/P2/sparse/variation-gap", cora, 2, func(c *Config) { c.Staleness.Policy, c.Staleness.Eps = "variation-gap", 0.02 }, nil},
		{"cora/P2/dense/3-layers/clip", cora, 2, func(c *Config) { c.Exchange.Dense, c.Model.Layers, c.Optim.Clip = true, 3, 0.5 }, nil},
		{"planted/P1", planted, 1, func(c *Config) {}, nil},
		{"planted/P2/plain", planted, 2, func(c *Config) { c.Model.Precompute = false }, nil},
		// NCCL through the engine: one GPU allows one rank per communicator.
		{"cora/P1/nccl", cora, 1, func(c *Config) { c.Exchange.Dense, c.Model.Layers = true, 3 }, func(c *Config) { c.Exchange.DeviceComm = "nccl" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Defaults()
			cfg.Optim.Epochs, cfg.Run.EvalEvery = 30, 10
			tc.edit(&cfg)
			cpu, err := RunInProcess(tc.ds, tc.p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Run.Device = "cuda"
			if tc.gpu != nil {
				tc.gpu(&cfg)
			}
			gpu, err := RunInProcess(tc.ds, tc.p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if gpu.Result.Device != "cuda" || cpu.Result.Device != "cpu" {
				t.Fatalf("backends used: %q and %q", cpu.Result.Device, gpu.Result.Device)
			}
			worst := 0.0
			for i, c := range cpu.Result.Curve {
				g := gpu.Result.Curve[i]
				rel := math.Abs(g.Loss-c.Loss) / math.Abs(c.Loss)
				worst = max(worst, rel)
				if rel > 1e-4 {
					t.Fatalf("epoch %d: GPU loss %.7g, CPU %.7g (relative %.2g)", i+1, g.Loss, c.Loss, rel)
				}
			}
			t.Logf("%d epochs, worst relative loss gap %.2g; ms/epoch CPU %.2f GPU %.2f; test acc CPU %.4f GPU %.4f",
				len(cpu.Result.Curve), worst, cpu.Result.MeanEpochMs, gpu.Result.MeanEpochMs, cpu.Result.FinalTestAcc, gpu.Result.FinalTestAcc)
		})
	}
}

// TestCUDAStopAndResumeIsBitIdentical: a GPU run checkpoints its device
// caches and resumes bit-identically (the GPU kernels are deterministic).
func TestCUDAStopAndResumeIsBitIdentical(t *testing.T) {
	cfg := Defaults()
	cfg.Run.Device, cfg.Optim.Clip = "cuda", 0.5
	cfg.Staleness.Policy, cfg.Staleness.Eps = "variation-gap", 0.03
	checkStopResume(t, cfg)
}

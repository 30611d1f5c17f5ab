package train

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"sancus/src/model"
	"sancus/src/sample"
)

// sampledConfig is cfg trained on sampled batches.
func sampledConfig(cfg Config, size int, draw sample.Draw, fanouts ...int) Config {
	cfg.Batch.Mode, cfg.Batch.Size, cfg.Batch.Draw, cfg.Batch.Fanouts = BatchSampled, size, draw, fanouts
	return cfg
}

// At fanout ≥ the largest degree, with every training vertex in one batch,
// a sampled step is a full-graph step: the same losses to 1e-5 and the
// same weights, for GCN, GraphSAGE and GAT, at P = 1 and 2, with either
// draw, and with dropout (its masks, and a GAT's attention dropout, are
// keyed alike).
func TestFullFanoutBatchIsGlobalStep(t *testing.T) {
	ds, _ := generated(t)
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		for _, dropout := range []float64{0, 0.5} {
			cfg := Defaults()
			cfg.Optim.Epochs, cfg.Model.Arch, cfg.Model.Dropout, cfg.Model.Precompute = 4, arch, dropout, dropout == 0
			if arch == model.ArchGAT { // small heads, two averaged at the output: both of GATFinish's ways
				cfg.Model.Heads, cfg.Model.Hidden, cfg.Model.OutHeads, cfg.Optim.WeightDecay = 4, 4, 2, 5e-4
			}
			global, err := RunInProcess(ds, 1, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				p    int
				draw sample.Draw
			}{{1, sample.DrawLocal}, {1, sample.DrawGlobal}, {2, sample.DrawGlobal}} {
				what := fmt.Sprintf("%v dropout %g P=%d %v", arch, dropout, c.p, c.draw)
				out, err := RunInProcess(ds, c.p, sampledConfig(cfg, ds.N, c.draw, ds.N, ds.N))
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				sameCurve(t, what, out.Result, global.Result, 1e-5)
				for i, p := range out.Params {
					for k, v := range p {
						if w := global.Params[i][k]; math.Abs(float64(v-w)) > 1e-5*(1+math.Abs(float64(w))) {
							t.Fatalf("%s: tensor %d[%d] is %g, full-graph %g", what, i, k, v, w)
						}
					}
				}
				if s := out.Result.Curve[0].Sampling; s == nil || s.Steps != 1 || s.Seeds != int64(len(ds.Train)) {
					t.Fatalf("%s: sampling figures %+v, want one step of %d seeds", what, s, len(ds.Train))
				}
			}
		}
	}
}

// With --batch-draw global the global batch does not depend on P, nor does
// any vertex's sample (keyed by original ids): P = 1, 2 and 4 (the last
// on a reordering partition) train alike, several steps an epoch, for
// GCN, GraphSAGE and GAT, with dropout (a GAT's attention dropout too),
// and the batches sample less than the graph; GraphSAGE's features travel
// as int4, rounded alike wherever a vertex is read.
func TestGlobalDrawDoesNotDependOnP(t *testing.T) {
	ds, _ := generated(t)
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		cfg := Defaults()
		cfg.Optim.Epochs, cfg.Model.Arch = 3, arch
		switch arch {
		case model.ArchSAGE:
			cfg.Wire.Fwd = format("int4")
		case model.ArchGAT:
			cfg.Model.Heads, cfg.Model.Hidden, cfg.Model.AttDropout = 4, 4, 0.3
		}
		cfg = sampledConfig(cfg, 64, sample.DrawGlobal, 4, 3)
		ref, err := RunInProcess(ds, 1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := ref.Result.Curve[0].Sampling
		if s.Steps != (len(ds.Train)+63)/64 || s.Seeds != int64(len(ds.Train)) || s.Vertices >= int64(s.Steps*3*ds.N) || s.FeaturesRemote != 0 {
			t.Fatalf("%v P=1: sampling figures %+v", arch, s.SampledCounts)
		}
		assign := scattered(ds.N)
		for _, p := range []int{2, 4} {
			var out Outcome
			if p == 4 {
				out, err = RunPartitioned(ds, assign, p, cfg)
			} else {
				out, err = RunInProcess(ds, p, cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			sameCurve(t, fmt.Sprintf("%v P=%d", arch, p), out.Result, ref.Result, 1e-5)
			got := out.Result.Curve[0].Sampling
			if got.Seeds != s.Seeds || got.Vertices < s.Vertices || got.FeaturesRemote == 0 || got.Bytes == 0 {
				t.Fatalf("%v P=%d: sampling figures %+v, at P=1 %+v", arch, p, got.SampledCounts, s.SampledCounts)
			}
		}
	}
}

// A rank that owns no training vertex takes every step with an empty
// batch, answering the others' requests: the run ends, and trains.
func TestRankWithoutTrainingVerticesDoesNotHang(t *testing.T) {
	ds, _ := generated(t)
	train := make([]bool, ds.N)
	for _, v := range ds.Train {
		train[v] = true
	}
	assign := make([]int32, ds.N) // rank 1: no training vertex
	for v := range assign {
		if !train[v] && v%2 == 0 {
			assign[v] = 1
		}
	}
	cfg := Defaults()
	cfg.Optim.Epochs = 2
	for _, draw := range []sample.Draw{sample.DrawLocal, sample.DrawGlobal} {
		out, err := RunPartitioned(ds, assign, 2, sampledConfig(cfg, 50, draw, 5, 5))
		if err != nil {
			t.Fatal(err)
		}
		c := out.Result.Curve
		if c[1].Loss >= c[0].Loss || c[0].Sampling.FeaturesRemote == 0 {
			t.Fatalf("%v: losses %g then %g, %d remote feature rows: want it to train across both ranks", draw, c[0].Loss, c[1].Loss, c[0].Sampling.FeaturesRemote)
		}
	}
}

// Sampled settings that cannot work are refused before any work, naming
// the flag.
func TestSampledSettingsAreChecked(t *testing.T) {
	ok := sampledConfig(Defaults(), 100, sample.DrawLocal, 10, 5)
	if err := ok.Validate(); err != nil {
		t.Fatalf("a sound sampled configuration: %v", err)
	}
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Batch.Fanouts = []int{10} }, "--fanouts gives 1"},
		{func(c *Config) { c.Batch.Fanouts = []int{10, 0} }, "layer 2's fanout"},
		{func(c *Config) { c.Batch.Size = 0 }, "--batch-size"},
		{func(c *Config) { c.Batch.Draw = 7 }, "--batch-draw"},
		{func(c *Config) { c.Wire.Fwd = format("auto") }, "--wire"},
		{func(c *Config) { c.Staleness.Policy = kind("epoch-fixed") }, "--staleness"},
		{func(c *Config) { c.Model.Layers, c.Model.Residual, c.Batch.Fanouts = 3, true, []int{2, 2, 2} }, "--residual"},
		{func(c *Config) { c.Optim.Clip = 1 }, "--clip"},
		{func(c *Config) { c.Batch.Mode = BatchGlobal }, "not --batch global"},
	} {
		cfg := ok
		c.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want a refusal naming %q, got %v", c.want, err)
		}
	}
	if _, err := RunInProcess(generatedMulti(t), 2, ok); err == nil || !strings.Contains(err.Error(), "multi-label") {
		t.Errorf("multi-label data: want a refusal naming it, got %v", err)
	}
}

// A sampled run stopped and resumed trains bit for bit as one that was
// not: the draws are keyed by step, not by what ran before.
func TestSampledStopAndResumeIsBitIdentical(t *testing.T) {
	checkStopResume(t, sampledConfig(Defaults(), 64, sample.DrawLocal, 5, 5))
}

// Sampling the next batch while this one trains (ByteGNN's pipeline)
// trains bit for bit as sampling each in turn: the batches are keyed by
// step, and the communicator is used by one goroutine at a time.
func TestSampleAheadTrainsAlike(t *testing.T) {
	ds, _ := generated(t)
	cfg := Defaults()
	cfg.Optim.Epochs, cfg.Model.Arch = 3, model.ArchSAGE
	cfg = sampledConfig(cfg, 48, sample.DrawLocal, 6, 4)
	plain, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Batch.Prefetch = true
	ahead, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "weights sampled ahead vs in turn", ahead.Params, plain.Params)
	for i, e := range ahead.Result.Curve {
		w := plain.Result.Curve[i]
		if e.Loss != w.Loss || e.Sampling.Vertices != w.Sampling.Vertices || len(e.Sampling.RankExposed) != 2 {
			t.Fatalf("epoch %d: loss %v, %d vertices sampled ahead; %v, %d in turn", e.Epoch, e.Loss, e.Sampling.Vertices, w.Loss, w.Sampling.Vertices)
		}
	}
	if ahead.Result.Curve[0].Sampling.Steps < 2 {
		t.Fatal("one step an epoch: nothing to sample ahead")
	}
}

// A GAT moves with the model as a GCN does (migrate_test.go): --migrate
// model at P = 2 reaches the features-move weights to 1e-5, attention
// dropout included (the step's dropout is the features-move step's).
func TestGATModelMoveTrainsAsFeaturesMove(t *testing.T) {
	ds, _ := generated(t)
	cfg := migrateConfig(model.ArchGAT)
	cfg.Model.Heads, cfg.Model.AttDropout = 2, 0.3
	ref, err := RunInProcess(ds, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Batch.Migrate = MigrateModel
	out, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameCurve(t, "gat P=2 model moves", out.Result, ref.Result, 1e-5)
	for j, w := range ref.Params {
		for k, v := range out.Params[j] {
			if math.Abs(float64(v-w[k])) > 1e-5*(1+math.Abs(float64(w[k]))) {
				t.Fatalf("tensor %d[%d] is %g, features-move %g", j, k, v, w[k])
			}
		}
	}
}

// scattered puts node v in part 7v mod 4: every part holds nodes from
// all over the graph, so each batch and micrograph crosses parts.
func scattered(n int) []int32 {
	assign := make([]int32, n)
	for v := range assign {
		assign[v] = int32(v*7) % 4
	}
	return assign
}

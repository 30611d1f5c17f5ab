package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"sancus/src/model"
	"sancus/src/sample"
)

// An iteration's plan trains every root once: without merging at its
// home, one share per time step; merging removes the time step with the
// fewest roots and deals its roots over the same replica's other steps.
func TestMigratePlanCoversTheBatch(t *testing.T) {
	const p = 4
	batch := make([]int64, 0, 103)
	for v := range int64(103) {
		batch = append(batch, v*7%400)
	}
	owner := func(v int64) int { return int(v / 100) }
	for merge := range p {
		sc := plan(batch, p, merge, owner)
		if len(sc.steps) != p-merge {
			t.Fatalf("merge %d: %d time steps, want %d", merge, len(sc.steps), p-merge)
		}
		var got []int64
		for d := range p {
			for t2 := range p {
				if !slices.Contains(sc.steps, t2) && len(sc.work[d][t2]) > 0 {
					t.Fatalf("merge %d: replica %d trains %d roots in removed time step %d", merge, d, len(sc.work[d][t2]), t2)
				}
				for _, v := range sc.work[d][t2] {
					if merge == 0 && owner(v) != (d+t2)%p {
						t.Fatalf("replica %d trains root %d (home %d) at rank %d", d, v, owner(v), (d+t2)%p)
					}
					got = append(got, v)
				}
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(batch))
		if !slices.Equal(got, want) {
			t.Fatalf("merge %d: the plan trains %d roots, not the batch's %d once each", merge, len(got), len(want))
		}
	}
}

// migrateConfig is a sampled GCN small enough that moving it costs fewer
// bytes than the batch's features.
func migrateConfig(arch model.Arch) Config {
	cfg := Defaults()
	cfg.Optim.Epochs, cfg.Model.Arch, cfg.Model.Hidden = 2, arch, 4
	return sampledConfig(cfg, 128, sample.DrawGlobal, 4, 3)
}

// Moving the model trains what moving the features does: with the same
// seed, --migrate model at P = 1, 2 and 4 (the last on a reordering
// partition, with a time step merged away) reaches the features-move
// global draw's weights to 1e-5, with dropout, for GCN and GraphSAGE.
// Pre-gathering changes bytes, never a bit of the weights. The model's
// bytes are the replicas' hops exactly.
func TestModelMoveTrainsAsFeaturesMove(t *testing.T) {
	ds, _ := generated(t)
	assign := scattered(ds.N)
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE} {
		cfg := migrateConfig(arch)
		ref, err := RunInProcess(ds, 1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ p, merge int }{{1, 0}, {2, 0}, {4, 0}, {4, 1}} {
			mv := cfg
			mv.Batch.Migrate, mv.Batch.Merge = MigrateModel, Merging(c.merge)
			var outs [2]Outcome
			for i, pre := range []bool{false, true} {
				mv.Batch.Pregather = pre
				what := fmt.Sprintf("%v P=%d merge %d pregather %v", arch, c.p, c.merge, pre)
				if c.p == 4 {
					outs[i], err = RunPartitioned(ds, assign, c.p, mv)
				} else {
					outs[i], err = RunInProcess(ds, c.p, mv)
				}
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				sameCurve(t, what, outs[i].Result, ref.Result, 1e-5)
				for j, w := range ref.Params {
					for k, v := range outs[i].Params[j] {
						if math.Abs(float64(v-w[k])) > 1e-5*(1+math.Abs(float64(w[k]))) {
							t.Fatalf("%s: tensor %d[%d] is %g, features-move %g", what, j, k, v, w[k])
						}
					}
				}
				s := outs[i].Result.Curve[0].Sampling
				m := s.Migration
				steps, ts := int64(s.Steps), int64(c.p-c.merge)
				params := int64(0)
				for _, w := range ref.Params {
					params += int64(len(w))
				}
				if m == nil || m.Fallback != 0 || m.TimeSteps != int(ts) || m.ModelBytes != steps*int64(c.p)*(ts-1)*4*params || s.Seeds != int64(len(ds.Train)) {
					t.Fatalf("%s: figures %+v %+v, want %d time steps, %d model bytes", what, s.SampledCounts, m, ts, steps*int64(c.p)*(ts-1)*4*params)
				}
				if m.NonRoot == 0 || m.RMicro < 0 || m.RMicro > 1 || len(m.RankStepRoots) != c.p || m.FeatureBytes != s.FeatureBytes {
					t.Fatalf("%s: locality %d of %d, R_micro %g, loads %v", what, m.Colocated, m.NonRoot, m.RMicro, m.RankStepRoots)
				}
				roots := int64(0)
				for _, r := range m.RankStepRoots {
					roots += sum(r)
				}
				if roots != s.Seeds {
					t.Fatalf("%s: %d micrographs over the time steps, %d seeds", what, roots, s.Seeds)
				}
				if c.p > 1 && c.merge == 0 && (s.FeatureBytes == 0 || m.Colocated == 0) {
					t.Fatalf("%s: no feature fetched or none co-located: %+v", what, m)
				}
			}
			what := fmt.Sprintf("%v P=%d merge %d", arch, c.p, c.merge)
			sameBits(t, what+": weights pre-gathered vs not", outs[1].Params, outs[0].Params)
			plain, pre := outs[0].Result.Curve[0].Sampling, outs[1].Result.Curve[0].Sampling
			if c.p > 1 && pre.FeatureBytes >= plain.FeatureBytes {
				t.Fatalf("%s: %d feature bytes pre-gathered, %d not: want fewer", what, pre.FeatureBytes, plain.FeatureBytes)
			}
			if pre.Vertices != plain.Vertices {
				t.Fatalf("%s: %d vertices pre-gathered, %d not", what, pre.Vertices, plain.Vertices)
			}
		}
	}
}

// Moving the model is refused where a fixed merging leaves no time step
// and its settings are refused without it; a model wider than every
// batch's features is no refusal: every iteration falls back.
func TestMigrateModelIsChecked(t *testing.T) {
	ds, _ := generated(t)
	cfg := migrateConfig(model.ArchGCN)
	cfg.Batch.Migrate, cfg.Model.Hidden = MigrateModel, 512
	out, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatalf("a wide model: %v", err)
	}
	for _, row := range out.Result.Curve {
		if m := row.Sampling.Migration; m.Fallback != row.Sampling.Steps || m.ModelBytes != 0 || m.FeatureBytes == 0 {
			t.Fatalf("a wide model, epoch %d: want every one of %d iterations fallen back, got %+v", row.Epoch, row.Sampling.Steps, m)
		}
	}
	cfg.Model.Hidden = 4
	for p, merge := range []Merging{1, 2} {
		cfg.Batch.Merge = merge
		if _, err := RunInProcess(ds, p+1, cfg); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("--merge-micrographs %d", merge)) {
			t.Fatalf("merging every time step at P = %d: want a refusal, got %v", p+1, err)
		}
	}
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Batch.Draw = sample.DrawLocal }, "--batch-draw global"},
		{func(c *Config) { c.Batch.Migrate = MigrateFeatures; c.Batch.Pregather = true }, "--pregather"},
		{func(c *Config) { c.Batch.Merge = -2 }, "--merge-micrographs"},
		{func(c *Config) { c.Batch.Migrate, c.Batch.Merge = MigrateFeatures, MergeAuto }, "--merge-micrographs"},
	} {
		bad := migrateConfig(model.ArchGCN)
		bad.Batch.Migrate = MigrateModel
		c.set(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want a refusal naming %q, got %v", c.want, err)
		}
	}
	var m Migrate
	if err := m.Set("model"); err != nil || !m.Model() {
		t.Fatalf("--migrate model: %v, %v", m, err)
	}
	if err := m.Set("both"); err == nil {
		t.Fatal("--migrate both: want an error")
	}
	var g Merging
	for s, want := range map[string]Merging{"auto": MergeAuto, "2": 2, "": 0} {
		if err := g.Set(s); err != nil || g != want {
			t.Fatalf("--merge-micrographs %q: %v, %v", s, g, err)
		}
		b, _ := json.Marshal(g)
		var back Merging
		if err := json.Unmarshal(b, &back); err != nil || back != want {
			t.Fatalf("--merge-micrographs %q through JSON %s: %v, %v", s, b, back, err)
		}
	}
	for _, s := range []string{"-1", "some", "1.5"} {
		if err := g.Set(s); err == nil {
			t.Fatalf("--merge-micrographs %q: want an error", s)
		}
	}
}

// A model-moving run stopped and resumed trains bit for bit as one that
// was not: its time steps are planned from the step's keyed draw alone.
func TestMigrateStopAndResumeIsBitIdentical(t *testing.T) {
	cfg := migrateConfig(model.ArchGCN)
	cfg.Batch.Migrate, cfg.Batch.Pregather = MigrateModel, true
	checkStopResume(t, cfg)
}

// Where moving the model costs more bytes than an iteration's features,
// that iteration fetches them instead and the run goes on: with global
// batches of 90, 90 and 20 roots and a model between them (P = 4, one
// time step merged or none, pre-gathered or not), the two full batches
// move the model and the last one falls back, every epoch, and the
// weights are still the features-move global draw's to 1e-5.
func TestMigrateFallsBackPerIteration(t *testing.T) {
	ds, _ := generated(t)
	assign := scattered(ds.N)
	cfg := migrateConfig(model.ArchGCN)
	cfg.Model.Hidden, cfg.Batch.Size, cfg.Model.Dropout = 12, 90, 0.5
	ref, err := RunInProcess(ds, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	params := int64(0)
	for _, w := range ref.Params {
		params += int64(len(w))
	}
	for _, merge := range []Merging{0, 1} {
		for _, pre := range []bool{false, true} {
			what := fmt.Sprintf("merge %d pregather %v", merge, pre)
			mv := cfg
			mv.Batch.Migrate, mv.Batch.Merge, mv.Batch.Pregather = MigrateModel, merge, pre
			out, err := RunPartitioned(ds, assign, 4, mv)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			sameCurve(t, what, out.Result, ref.Result, 1e-5)
			for j, w := range ref.Params {
				for k, v := range out.Params[j] {
					if math.Abs(float64(v-w[k])) > 1e-5*(1+math.Abs(float64(w[k]))) {
						t.Fatalf("%s: tensor %d[%d] is %g, features-move %g", what, j, k, v, w[k])
					}
				}
			}
			for _, row := range out.Result.Curve {
				s := row.Sampling
				m, ts := s.Migration, int64(4-merge)
				roots := s.Batches[len(s.Batches)-1].Seeds
				for _, r := range m.RankStepRoots {
					roots += sum(r)
				}
				if s.Steps != 3 || m.Fallback != 1 || m.ModelBytes != 2*4*(ts-1)*4*params || roots != s.Seeds || s.Batches[2].Seeds != 20 {
					t.Fatalf("%s epoch %d: want the last of 3 iterations fallen back, got %+v, %+v", what, row.Epoch, s.SampledCounts, m)
				}
			}
		}
	}
}

// --merge-micrographs auto is HopGNN §5.3's examination period: the first
// epoch merges nothing, each later one merges one more time step while the
// epoch before it got faster, and the first epoch that did not (or the
// last time step) ends it with the last count that paid.
func TestAutoMergeFollowsTheExamination(t *testing.T) {
	for _, c := range []struct {
		secs []float64
		most int
		want int
	}{
		{nil, 3, 0},
		{[]float64{5}, 3, 1},
		{[]float64{5, 4}, 3, 2},          // merging one paid: try two
		{[]float64{5, 4, 3}, 3, 3},       // and three, the most
		{[]float64{5, 4, 3, 9}, 3, 2},    // three did not pay: two
		{[]float64{5, 4, 3, 2, 9}, 3, 3}, // three paid and is the most: it stays
		{[]float64{5, 6}, 3, 0},          // merging one did not pay: none
		{[]float64{5, 6, 1, 0.5}, 3, 0},  // and the examination is over
		{[]float64{5, 4, 4}, 3, 1},       // no faster is not faster
		{[]float64{5, 4, 4.5, 1}, 3, 1},
		{[]float64{5}, 1, 1},
		{[]float64{5, 4, 3}, 1, 1},
		{[]float64{5, 9}, 1, 0},
		{[]float64{5, 4}, 0, 0}, // P = 1: nothing to merge
	} {
		if got := autoMerge(c.secs, c.most); got != c.want {
			t.Errorf("after epochs of %v s (at most %d): merges %d, want %d", c.secs, c.most, got, c.want)
		}
	}
}

// A run with --merge-micrographs auto merges, epoch by epoch, what the
// examination says of the agreed times before it (the second epoch always
// tries one), a resumed run going on from its checkpoint's times, and
// trains the features-move global draw's weights to 1e-5 whatever it
// merged.
func TestAutoMergeTrainsAsFeaturesMove(t *testing.T) {
	ds, _ := generated(t)
	assign := scattered(ds.N)
	cfg := migrateConfig(model.ArchGCN)
	cfg.Optim.Epochs, cfg.Model.Dropout = 6, 0.5
	ref, err := RunInProcess(ds, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mv := cfg
	mv.Batch.Migrate, mv.Batch.Merge, mv.Batch.Pregather = MigrateModel, MergeAuto, true
	check := func(what string, out Outcome) {
		t.Helper()
		sameCurve(t, what, out.Result, ref.Result, 1e-5)
		for j, w := range ref.Params {
			for k, v := range out.Params[j] {
				if math.Abs(float64(v-w[k])) > 1e-5*(1+math.Abs(float64(w[k]))) {
					t.Fatalf("%s: tensor %d[%d] is %g, features-move %g", what, j, k, v, w[k])
				}
			}
		}
		var secs []float64
		for e, row := range out.Result.Curve {
			m := row.Sampling.Migration
			if want := autoMerge(secs, 3); m.Merged != want || m.TimeSteps != 4-want || m.Seconds <= 0 {
				t.Fatalf("%s epoch %d: merged %d in %v s, want %d after epochs of %v s", what, e+1, m.Merged, m.Seconds, want, secs)
			}
			secs = append(secs, m.Seconds)
		}
		if out.Result.Curve[1].Sampling.Migration.Merged != 1 {
			t.Fatalf("%s: the second epoch merged %d time steps, want 1", what, out.Result.Curve[1].Sampling.Migration.Merged)
		}
	}
	full, err := RunPartitioned(ds, assign, 4, mv)
	if err != nil {
		t.Fatal(err)
	}
	check("auto", full)

	dir := t.TempDir()
	mv.Run.CheckpointDir, mv.Run.CheckpointEvery = dir, 1
	var calls atomic.Int32
	mv.Run.Stop = func() bool { return calls.Add(1) > 4*3 } // during the fourth epoch
	if _, err := RunPartitioned(ds, assign, 4, mv); !errors.Is(err, ErrStopped) {
		t.Fatalf("want ErrStopped, got %v", err)
	}
	mv.Run.Stop, mv.Run.Resume = nil, true
	resumed, err := RunPartitioned(ds, assign, 4, mv)
	if err != nil {
		t.Fatal(err)
	}
	check("auto, resumed", resumed)
}

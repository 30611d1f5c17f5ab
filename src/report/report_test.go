package report

import (
	"math"
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

// TestTargetsShared: every run of a graph, whole or in per-P shards, is
// timed to the one target, 99% of the best any of them reached; a run that
// never reaches it is marked, however close its own best came.
func TestTargetsShared(t *testing.T) {
	run := func(dataset string, val ...float64) *result.Run {
		r := &result.Run{Dataset: dataset, Result: &result.Result{Ranks: 1}}
		for i, v := range val {
			r.Result.Curve = append(r.Result.Curve, result.Epoch{Epoch: i + 1, ValAcc: v, Ms: 100, Evaluated: true})
			r.Result.BestValAcc = max(r.Result.BestValAcc, v)
		}
		return r
	}
	runs := []*result.Run{
		run("cora", 0.5, 0.79, 0.80),
		run("cora-P2", 0.7, 0.75, 0.78),
		run("planted", 0.3, 0.4, 0.5),
	}
	targets := Targets(runs)
	if len(targets) != 2 || targets["cora"].Best != 0.80 || math.Abs(targets["cora"].Value-0.792) > 1e-12 || targets["planted"].Best != 0.5 {
		t.Fatalf("targets %+v", targets)
	}
	rows := Summarize(runs)
	for i, want := range []float64{0.3, -1, 0.3} {
		if math.Abs(rows[i].TimeToTarget-want) > 1e-9 {
			t.Errorf("%s: time to target %v, want %v", runs[i].Dataset, rows[i].TimeToTarget, want)
		}
	}
}

// TestHostCores: an in-process run of one rank shows its host's cores; a
// run of P ranks at one thread each oversubscribes a host of fewer cores;
// runs that set --threads or ran under MPI say nothing of a host, and an
// MPI run on a known host oversubscribes it only if all its ranks ran there.
func TestHostCores(t *testing.T) {
	run := func(host, launcher string, ranks, threads int, cmd string) *result.Run {
		return &result.Run{Host: host, Launcher: launcher, Command: cmd, Result: &result.Result{Ranks: ranks, Threads: threads}}
	}
	p1 := run("a", "none", 1, 2, "sancus train --data d")
	p2 := run("a", "none", 2, 1, "sancus train --data d --ranks 2")
	p4 := run("a", "none", 4, 1, "sancus train --data d --ranks 4")
	pinned := run("b", "none", 1, 8, "sancus train --data d --threads 8")
	mpi := run("c", "openmpi", 1, 4, "sancus train --shards s")
	wide := run("d", "none", 2, 3, "sancus train --data d --ranks 2")
	mpi4 := run("a", "slurm", 4, 1, "sancus train --shards s")
	hosts := HostCores([]*result.Run{p1, p2, p4, pinned, mpi, wide, mpi4})
	if c := hosts["a"]; !c.Known() || c.Lo != 2 {
		t.Errorf("host a: %+v, want 2 cores", c)
	}
	if _, ok := hosts["b"]; ok {
		t.Errorf("host b, known only from --threads, got %+v", hosts["b"])
	}
	if _, ok := hosts["c"]; ok {
		t.Errorf("host c, known only from an MPI run, got %+v", hosts["c"])
	}
	if c := hosts["d"]; c.Known() || c.Lo != 6 || c.Hi != 7 {
		t.Errorf("host d: %+v, want 6 to 7 cores", c)
	}
	for _, c := range []struct {
		r          *result.Run
		over, sure bool
	}{{p1, false, true}, {p2, false, true}, {p4, true, true}, {pinned, false, false}, {mpi, false, false}, {wide, false, true}, {mpi4, true, false}} {
		cores, over, sure := Oversubscribed(c.r, hosts)
		if over != c.over || (over && (cores != 2 || sure != c.sure)) {
			t.Errorf("%s P=%d: oversubscribed %v (sure %v) on %d cores, want %v (sure %v)", c.r.Host, c.r.Result.Ranks, over, sure, cores, c.over, c.sure)
		}
	}
	// A run that records its host's cores and ranks there is judged by
	// them, an MPI run included.
	said := run("c", "openmpi", 4, 1, "sancus train --shards s")
	said.Cores, said.RanksOnHost = 2, 4
	if cores, over, sure := Oversubscribed(said, hosts); cores != 2 || !over || !sure {
		t.Errorf("4 ranks recorded on a 2-core host: %d cores, oversubscribed %v, sure %v", cores, over, sure)
	}
	said.RanksOnHost = 2
	if _, over, _ := Oversubscribed(said, hosts); over {
		t.Error("2 ranks of 1 thread on 2 cores called oversubscribed")
	}
}

package train

import (
	"sancus/launch"
	"sancus/src/result"
	"strings"
	"testing"
)

// TestEvalEveryDue: every k epochs and the last; auto evaluates the
// first epoch, then every k epochs as the first evaluation's counts fix
// k, so that evaluation takes at most a tenth of the run.
func TestEvalEveryDue(t *testing.T) {
	for _, c := range []struct {
		v          EvalEvery
		ep, epochs int
		k          int
		want       bool
	}{
		{3, 2, 10, 0, true},
		{3, 3, 10, 0, false},
		{0, 4, 10, 0, false},
		{0, 9, 10, 0, true},
		{EvalAuto, 0, 10, 0, true}, // k not known yet
		{EvalAuto, 1, 10, 5, false},
		{EvalAuto, 4, 10, 5, true},
		{EvalAuto, 9, 10, 7, true}, // the last epoch, always
	} {
		if got := c.v.due(c.ep, c.epochs, c.k); got != c.want {
			t.Errorf("%v at epoch %d of %d (k %d): %v, want %v", c.v, c.ep, c.epochs, c.k, got, c.want)
		}
	}
	for _, c := range []struct {
		train, eval float64
		k           int
	}{
		{0, 0, 5},      // one rank: a forward against a forward and a backward
		{100, 10, 5},   // evaluation's bytes are few: compute bounds it
		{100, 400, 36}, // four epochs' bytes each evaluation
	} {
		k := autoInterval(c.train, c.eval)
		if k != c.k {
			t.Errorf("train %g, eval %g bytes: k %d, want %d", c.train, c.eval, k, c.k)
		}
		if rho := max(0.5, c.eval/max(c.train, 1e-300)); c.train > 0 && rho/(float64(k)+rho) > 0.1 {
			t.Errorf("k %d lets evaluation take %.2f of the run", k, rho/(float64(k)+rho))
		}
	}
	for _, s := range []string{"auto", "0", "7"} {
		v, err := ParseEvalEvery(s)
		if err != nil || v.String() != s {
			t.Errorf("%q: %v %v", s, v, err)
		}
	}
	if _, err := ParseEvalEvery("-2"); err == nil {
		t.Error("-2 accepted")
	}
}

// TestEvalAutoEvaluatesFirstAndLast: an auto run evaluates its first and
// last epochs and every k-th between, the same epochs each time it runs,
// and keeps the losses of a run that evaluates every epoch.
func TestEvalAutoEvaluatesFirstAndLast(t *testing.T) {
	ds := loadCora(t)
	cfg := Defaults()
	cfg.Optim.Epochs = 12
	every, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Run.EvalEvery = EvalAuto
	auto, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := auto.Result.Curve
	if !c[0].Evaluated || !c[len(c)-1].Evaluated {
		t.Fatalf("auto evaluated the first epoch: %v, the last: %v", c[0].Evaluated, c[len(c)-1].Evaluated)
	}
	evaluated := 0
	for i, row := range c {
		if row.Evaluated != again.Result.Curve[i].Evaluated {
			t.Fatalf("epoch %d evaluated in one run and not in the other", i+1)
		}
		if row.Evaluated {
			evaluated++
		}
	}
	if evaluated == len(c) {
		t.Fatal("auto evaluated every epoch")
	}
	for i, row := range c {
		if row.Loss != every.Result.Curve[i].Loss {
			t.Fatalf("epoch %d: loss %v with auto evaluation, %v evaluating every epoch", i+1, row.Loss, every.Result.Curve[i].Loss)
		}
		if row.Evaluated && row.ValAcc != every.Result.Curve[i].ValAcc {
			t.Fatalf("epoch %d: val %v, %v evaluating every epoch", i+1, row.ValAcc, every.Result.Curve[i].ValAcc)
		}
	}
}

// TestBytesByPurpose: each epoch's training bytes split into the layers'
// exchange and the weight-gradient allreduce; a staleness policy that
// skips broadcasts cuts the first and leaves the second as it was. (A
// generated graph: Cora's training nodes all lie in rank 0's rows, whose
// forward blocks the restricted last layer never needs elsewhere.)
func TestBytesByPurpose(t *testing.T) {
	ds, _ := generated(t)
	cfg := Defaults()
	cfg.Optim.Epochs = 4
	fresh, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Staleness.Policy, cfg.Staleness.Eps = kind("epoch-fixed"), 3
	stale, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fresh.Result.Curve {
		s := stale.Result.Curve[i]
		for _, r := range []struct {
			name string
			row  result.Epoch
		}{{"fresh", f}, {"stale", s}} {
			if r.row.AllreduceBytes <= 0 || r.row.ExchangeBytes+r.row.AllreduceBytes > r.row.BytesSent {
				t.Fatalf("%s epoch %d: exchange %d + allreduce %d of %d bytes", r.name, i+1, r.row.ExchangeBytes, r.row.AllreduceBytes, r.row.BytesSent)
			}
		}
		if s.AllreduceBytes != f.AllreduceBytes {
			t.Errorf("epoch %d: allreduce %d bytes with skips, %d without", i+1, s.AllreduceBytes, f.AllreduceBytes)
		}
		if i > 0 && s.Skipped > 0 && s.ExchangeBytes >= f.ExchangeBytes {
			t.Errorf("epoch %d: %d blocks skipped, yet exchange %d bytes ≥ %d without skips", i+1, s.Skipped, s.ExchangeBytes, f.ExchangeBytes)
		}
	}
	if stale.Result.Curve[1].Skipped == 0 {
		t.Fatal("epoch-fixed ε 3 skipped nothing in epoch 2")
	}
}

// TestBestParamsAreTheBestEpochs: the parameters kept at the best
// validation epoch are those of a run trained to that epoch and no
// further.
func TestBestParamsAreTheBestEpochs(t *testing.T) {
	ds := loadCora(t)
	cfg := Defaults()
	cfg.Optim.Epochs, cfg.Optim.LR = 40, 0.05
	long, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	best := long.Result.BestEpoch
	if best == cfg.Optim.Epochs || long.BestParams == nil {
		t.Fatalf("best epoch %d of %d, best parameters kept: %v: the test needs a best epoch before the last", best, cfg.Optim.Epochs, long.BestParams != nil)
	}
	cfg.Optim.Epochs = best
	short, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range short.Params {
		for j, v := range short.Params[i] {
			if long.BestParams[i][j] != v {
				t.Fatalf("tensor %d value %d: kept %v, a run to epoch %d has %v", i, j, long.BestParams[i][j], best, v)
			}
		}
	}
}

// TestMemoryCheckCountsTheRanksOnTheHost: ranks sharing a host's memory
// are checked together, so ranks that each fit alone are refused when
// their sum does not.
func TestMemoryCheckCountsTheRanksOnTheHost(t *testing.T) {
	if launch.AvailableBytes() <= 0 {
		t.Skip("this machine's free memory cannot be read: nothing is checked")
	}
	ds := loadCora(t)
	cfg := Defaults()
	cfg.Optim.Epochs = 1
	if _, err := RunInProcess(ds, 1, cfg); err != nil {
		t.Fatalf("one rank: %v", err)
	}
	cfg.Run.RanksOnHost = 1 << 30
	_, err := RunInProcess(ds, 1, cfg)
	if err == nil || !strings.Contains(err.Error(), "on this host") {
		t.Fatalf("2³⁰ ranks on one host: %v", err)
	}
}

// TestEvalAutoResumesItsInterval: a stopped run resumed with
// --eval-every auto evaluates the epochs the uninterrupted run does (its
// checkpoint carries k), so its curve, best epoch and saved model agree.
func TestEvalAutoResumesItsInterval(t *testing.T) {
	cfg := Defaults()
	cfg.Run.EvalEvery = EvalAuto
	checkStopResume(t, cfg)
}

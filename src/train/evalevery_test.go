package train

import (
	"sancus/src/result"
	"testing"
)

// TestEvalEveryDue: every k epochs and the last; auto evaluates the first
// epoch, then only while evaluation stays within a tenth of the time, and
// always the last.
func TestEvalEveryDue(t *testing.T) {
	for _, c := range []struct {
		v                 EvalEvery
		ep, epochs        int
		train, eval, last float64
		want              bool
	}{
		{3, 2, 10, 0, 0, 0, true},
		{3, 3, 10, 0, 0, 0, false},
		{0, 4, 10, 0, 0, 0, false},
		{0, 9, 10, 0, 0, 0, true},
		{EvalAuto, 0, 10, 0, 0, 0, true},      // nothing measured yet
		{EvalAuto, 1, 10, 1, 0.1, 0.1, false}, // 0.2 of 1.2 s: over a tenth
		{EvalAuto, 5, 10, 5, 0.1, 0.1, true},  // 0.2 of 5.2 s
		{EvalAuto, 9, 10, 1, 1, 1, true},      // the last epoch, always
	} {
		if got := c.v.due(c.ep, c.epochs, c.train, c.eval, c.last); got != c.want {
			t.Errorf("%v at epoch %d of %d (train %g s, eval %g s, last %g s): %v, want %v", c.v, c.ep, c.epochs, c.train, c.eval, c.last, got, c.want)
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

// TestEvalAutoEvaluatesFirstAndLast: whatever the timings, an auto run
// evaluates its first and last epochs, reports its best from those it
// evaluated, and keeps the losses of a run that evaluates every epoch.
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
	c := auto.Result.Curve
	if !c[0].Evaluated || !c[len(c)-1].Evaluated {
		t.Fatalf("auto evaluated the first epoch: %v, the last: %v", c[0].Evaluated, c[len(c)-1].Evaluated)
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

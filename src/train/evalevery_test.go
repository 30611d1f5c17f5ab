package train

import "testing"

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

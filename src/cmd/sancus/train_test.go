package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sancus/src/result"
)

// TestSampledBatchFlags: --batch sampled with its flags trains two ranks
// and writes each epoch's sampling figures; settings that cannot work are
// refused naming the flag.
func TestSampledBatchFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	if o, err := run(t, 0, "train", "--data", cora, "--ranks", "2", "--epochs", "2", "--quiet", "--out", out,
		"--batch", "sampled", "--fanouts", "5,5", "--batch-size", "100", "--batch-draw", "global", "--model", "sage"); err != nil {
		t.Fatalf("train: %v\n%s", err, o)
	}
	rep := readResult(t, out)
	s := rep.Result.Curve[1].Sampling
	if s == nil || s.Steps != 2 || s.Seeds != 140 || s.FeaturesRemote == 0 || len(s.RankBytes) != 2 || s.RankBytes[1] == 0 || len(s.Batches) != 2 {
		t.Fatalf("epoch 2's sampling figures: %+v", s)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fanouts", "5"}, "--fanouts gives 1"},
		{[]string{"--batch-size", "0"}, "--batch-size must be"},
		{[]string{"--batch-draw", "anywhere"}, "anywhere"},
	} {
		args := append([]string{"train", "--data", cora, "--epochs", "1", "--quiet", "--out", out, "--batch", "sampled"}, c.args...)
		if o, err := run(t, 0, args...); err == nil || !strings.Contains(o, c.want) {
			t.Errorf("%v: %v, want a refusal naming %q\n%s", c.args, err, c.want, o)
		}
	}
}

func readResult(t *testing.T, path string) result.Run {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep result.Run
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestSampledUnderMPIMatchesOneRank: two MPI ranks drawing one global
// batch train as one in-process rank does, to 1e-5.
func TestSampledUnderMPIMatchesOneRank(t *testing.T) {
	needMPI(t)
	dir := t.TempDir()
	args := []string{"train", "--data", cora, "--epochs", "3", "--quiet", "--batch", "sampled", "--fanouts", "10,5", "--batch-size", "64", "--batch-draw", "global"}
	one, two := filepath.Join(dir, "one.json"), filepath.Join(dir, "two.json")
	if o, err := run(t, 0, append(args, "--out", one)...); err != nil {
		t.Fatalf("one rank: %v\n%s", err, o)
	}
	if o, err := run(t, 2, append(args, "--out", two)...); err != nil {
		t.Fatalf("mpirun -np 2: %v\n%s", err, o)
	}
	a, b := readResult(t, one).Result, readResult(t, two).Result
	for i, e := range b.Curve {
		if w := a.Curve[i].Loss; math.Abs(e.Loss-w) > 1e-5*w {
			t.Fatalf("epoch %d: loss %.8f under MPI, %.8f on one rank", e.Epoch, e.Loss, w)
		}
	}
	if b.Curve[0].Sampling.FeaturesRemote == 0 {
		t.Fatal("two MPI ranks fetched no feature row from each other")
	}
}

// TestEpochLineETA: each epoch's line but the last says the time left, from
// the mean epoch so far; the results JSON does not carry it. Only the form
// is checked, never a value: timing depends on the machine.
func TestEpochLineETA(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	o, err := run(t, 0, "train", "--data", cora, "--epochs", "4", "--out", out)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, o)
	}
	eta := regexp.MustCompile(`  eta (\d+h)?(\d+m)?\d+(\.\d+)?s$`)
	var epochs []string
	for _, l := range strings.Split(o, "\n") {
		if strings.HasPrefix(l, "epoch ") {
			epochs = append(epochs, l)
		}
	}
	if len(epochs) != 4 {
		t.Fatalf("%d epoch lines, want 4:\n%s", len(epochs), o)
	}
	for i, l := range epochs {
		if has := eta.MatchString(l); has != (i < 3) {
			t.Errorf("epoch line %d: %q; want an eta on every line but the last", i+1, l)
		}
	}
	if b, _ := os.ReadFile(out); strings.Contains(string(b), `"eta`) || strings.Contains(string(b), " eta ") {
		t.Errorf("%s mentions the eta: it is for the progress line alone", out)
	}
}

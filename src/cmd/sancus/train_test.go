package main

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep result.Run
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	s := rep.Result.Curve[1].Sampling
	if s == nil || s.Steps != 2 || s.Seeds != 140 || s.FeaturesRemote == 0 || len(s.RankBytes) != 2 || s.RankBytes[1] == 0 || len(s.Batches) != 2 {
		t.Fatalf("epoch 2's sampling figures: %+v", s)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "gat"}, "--model gat"},
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

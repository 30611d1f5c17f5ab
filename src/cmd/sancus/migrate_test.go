package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// train --migrate model reads its settings from the command line: the
// model hops (one merged time step at P = 2 leaves none) and the result
// carries the migration's figures.
func TestTrainMigrateModel(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	for _, merge := range []string{"0", "1"} {
		if o, err := run(t, 0, "train", "--data", cora, "--ranks", "2", "--epochs", "1", "--quiet", "--hidden", "4",
			"--batch", "sampled", "--fanouts", "5,5", "--batch-size", "500", "--batch-draw", "global",
			"--migrate", "model", "--pregather", "--merge-micrographs", merge, "--out", out); err != nil {
			t.Fatalf("train --migrate model: %v\n%s", err, o)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Result struct {
				Curve []struct {
					Sampling struct {
						Migration *struct {
							TimeSteps  int   `json:"time_steps"`
							Pregather  bool  `json:"pregather"`
							ModelBytes int64 `json:"model_bytes"`
						} `json:"migration"`
					} `json:"sampling"`
				} `json:"curve"`
			} `json:"result"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		m := r.Result.Curve[0].Sampling.Migration
		if m == nil || !m.Pregather || (m.TimeSteps == 2) != (merge == "0") || (m.ModelBytes > 0) != (merge == "0") {
			t.Fatalf("merge %s: migration figures %+v", merge, m)
		}
	}
}

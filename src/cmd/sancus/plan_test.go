package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plan prints a row for every P up to the cluster and writes its table;
// bench rank replays a rank of Cora.
func TestPlanAndBenchRank(t *testing.T) {
	cora := filepath.Join("..", "..", "..", "testdata", "cora")
	out := filepath.Join(t.TempDir(), "plan.json")
	text, err := run(t, 0, "plan", "--data", cora, "--spmm-gflops", "2", "--gemm-gflops", "20", "--nodes", "4", "--ranks-per-node", "2", "--out", out)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, text)
	}
	if !strings.Contains(text, "recommended: P = ") {
		t.Errorf("plan recommends nothing:\n%s", text)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Rows []struct{ Ranks int } }
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 || res.Rows[3].Ranks != 8 { // P = 1, 2, 4, 8: the cluster's 8 ranks
		t.Errorf("plan's rows: %+v, want P = 1, 2, 4, 8", res.Rows)
	}
	if text, err := run(t, 0, "plan", "--data", cora); err == nil || !strings.Contains(text, "--calibrate") {
		t.Errorf("plan without rates: %v\n%s", err, text)
	}
	text, err = run(t, 0, "bench", "rank", "--data", cora, "--parts", "4", "--rank", "2", "--epochs", "3")
	if err != nil || !strings.Contains(text, "rank 2 of 4:") {
		t.Errorf("bench rank: %v\n%s", err, text)
	}
}

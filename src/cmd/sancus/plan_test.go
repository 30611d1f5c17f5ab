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

// plan --calibrate replays the fitted and the checked P in turn: every
// point is reported, only the fitted ones fitted, and each replayed rank
// moves the bytes plan counts for it. (A fit the load on this machine
// makes implausible is refused, naming the flag.)
func TestPlanCalibratesAndChecks(t *testing.T) {
	cora := filepath.Join("..", "..", "..", "testdata", "cora")
	out := filepath.Join(t.TempDir(), "plan.json")
	text, err := run(t, 0, "plan", "--data", cora, "--calibrate", "--calibrate-ranks", "2,4,8", "--validate-ranks", "16", "--calibrate-rounds", "2", "--nodes", "2", "--ranks-per-node", "2", "--out", out)
	if err != nil {
		if !strings.Contains(text, "--calibrate") {
			t.Fatalf("plan --calibrate: %v\n%s", err, text)
		}
		return
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Calibration struct {
			Rounds int
			Points []struct {
				Ranks   int
				Fitted  bool
				Sent    int64 `json:"bytes_sent"`
				Recv    int64 `json:"bytes_recv"`
				Counted struct{ Sent, Recv int64 }
			}
		}
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	pts := res.Calibration.Points
	if res.Calibration.Rounds != 2 || len(pts) != 4 || !pts[0].Fitted || !pts[2].Fitted || pts[3].Ranks != 16 || pts[3].Fitted {
		t.Fatalf("calibration: %+v", res.Calibration)
	}
	for _, p := range pts {
		if p.Sent != p.Counted.Sent || p.Recv != p.Counted.Recv {
			t.Errorf("P = %d: replayed %d sent, %d received; counted %d, %d", p.Ranks, p.Sent, p.Recv, p.Counted.Sent, p.Counted.Recv)
		}
	}
}

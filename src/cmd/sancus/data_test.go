package main

import (
	"math"
	"path/filepath"
	"testing"
)

// TestOGBRoundTripTrainsLikeMatrixMarket: gen --format ogb writes the very
// graph gen writes as Matrix Market; training on either gives the same
// losses (to 1e-6), in one process and from shards under mpirun.
func TestOGBRoundTripTrainsLikeMatrixMarket(t *testing.T) {
	dir := t.TempDir()
	gen := []string{"gen", "--nodes", "3000", "--edges", "20000", "--features", "32", "--feature-nnz", "6", "--classes", "5", "--seed", "9"}
	mtx, ogb := filepath.Join(dir, "mtx"), filepath.Join(dir, "ogb")
	for _, g := range [][]string{append(gen, "--out", mtx), append(gen, "--out", ogb, "--format", "ogb")} {
		if o, err := run(t, 0, g...); err != nil {
			t.Fatalf("%v: %v\n%s", g, err, o)
		}
	}
	train := func(np int, data string, name string) *Report {
		out := filepath.Join(dir, name+".json")
		args := []string{"train", "--epochs", "30", "--quiet", "--out", out}
		if np > 0 {
			shards := filepath.Join(dir, name+"-shards")
			if o, err := run(t, 0, "prepare", "--data", data, "--parts", "2", "--out", shards); err != nil {
				t.Fatalf("prepare %s: %v\n%s", data, err, o)
			}
			args = append(args, "--shards", shards)
		} else {
			args = append(args, "--data", data)
		}
		if o, err := run(t, np, args...); err != nil {
			t.Fatalf("train %s: %v\n%s", data, err, o)
		}
		return readReport(t, out)
	}
	want := train(0, mtx, "mtx")
	for _, got := range []*Report{train(0, ogb, "ogb"), train(2, ogb, "ogb-P2")} {
		for i, e := range got.Result.Curve {
			if d := math.Abs(e.Loss - want.Result.Curve[i].Loss); d > 1e-6 {
				t.Fatalf("epoch %d: loss %.9f from OGB, %.9f from Matrix Market", e.Epoch, e.Loss, want.Result.Curve[i].Loss)
			}
		}
	}
}

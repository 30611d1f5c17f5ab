package main

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/result"
)

// TestFoldColumnsGathersTheSameRows: the kernel benchmark's in-L2 product
// is the real one with H folded, so Â·H over the folded columns equals Â·H
// over an H whose row c is the folded H's row c mod rows, bit for bit.
func TestFoldColumnsGathersTheSameRows(t *testing.T) {
	const n, cols, rows, w = 60, 500, 16, 32
	r := rand.New(rand.NewPCG(1, 2))
	a := &matrix.CSR{Rows: n, Cols: cols, RowPtr: make([]int64, n+1)}
	for i := 0; i < n; i++ {
		for c := 0; c < cols; c++ {
			if r.IntN(20) == 0 {
				a.ColIdx = append(a.ColIdx, int32(c))
				a.Val = append(a.Val, r.Float32())
			}
		}
		a.RowPtr[i+1] = int64(len(a.ColIdx))
	}
	small, big := matrix.NewDense(rows, w), matrix.NewDense(cols, w)
	for i := range small.Data {
		small.Data[i] = r.Float32() - 0.5
	}
	for c := 0; c < cols; c++ {
		copy(big.Row(c), small.Row(c%rows))
	}
	want, got := matrix.NewDense(n, w), matrix.NewDense(n, w)
	if err := kernels.SpMM(want, a, big, false); err != nil {
		t.Fatal(err)
	}
	f := foldColumns(a, rows)
	if f.Cols != rows || f.NNZ() != a.NNZ() {
		t.Fatalf("folded: %d columns, %d nonzeros; want %d, %d", f.Cols, f.NNZ(), rows, a.NNZ())
	}
	if err := kernels.SpMM(got, f, small, false); err != nil {
		t.Fatal(err)
	}
	for i := range want.Data {
		if got.Data[i] != want.Data[i] {
			t.Fatalf("element %d: folded %v, real %v", i, got.Data[i], want.Data[i])
		}
	}
}

// TestRooflineTakesEachClassItsLimit: per class, the larger of its bytes
// over the triad and its flops over the peak, per epoch, summed.
func TestRooflineTakesEachClassItsLimit(t *testing.T) {
	rk := result.RankStats{
		StepKernelMB:    map[string]float64{"gemm": 100, "spmm": 40, "loss": 0},
		StepKernelGFLOP: map[string]float64{"gemm": 2, "spmm": 0.02, "loss": 0},
	}
	// Two epochs at 10 GB/s and 100 GFLOP/s: gemm max(5, 10) ms, spmm
	// max(2, 0.1) ms.
	ms, terms := roofline(rk, 2, 10, 100)
	if math.Abs(ms-12) > 1e-9 || !strings.Contains(terms, "gemm 10.00 1.00 GFLOP") || !strings.Contains(terms, "spmm 2.00 memory") || strings.Contains(terms, "loss") {
		t.Fatalf("roofline %v ms (%s), want 12 ms: gemm 10 by its flops, spmm 2 by its bytes, no loss", ms, terms)
	}
}

// TestProfiledStepsCountPerEpoch: with --profile-kernels a run's training
// steps' counts grow by the same amount each epoch (a dropped entry still
// counts), evaluation apart, both ranks report them, and bench triad draws
// the roofline from them.
func TestProfiledStepsCountPerEpoch(t *testing.T) {
	dir := t.TempDir()
	var runs [2]*result.Run
	for i, epochs := range []string{"2", "4"} {
		out := filepath.Join(dir, "r"+epochs+".json")
		if o, err := run(t, 0, "train", "--data", cora, "--ranks", "2", "--epochs", epochs, "--quiet", "--profile-kernels", "--out", out); err != nil {
			t.Fatalf("train: %v\n%s", err, o)
		}
		runs[i] = readReport(t, out)
	}
	for r := range 2 {
		two, four := runs[0].Result.PerRank[r], runs[1].Result.PerRank[r]
		var mb float64
		for _, c := range kernels.TimedClasses {
			mb += four.StepKernelMB[c]
			if g2, g4 := two.StepKernelGFLOP[c], four.StepKernelGFLOP[c]; math.Abs(g4-2*g2) > 1e-9*g4 {
				t.Errorf("rank %d %s: %g GFLOP in 4 epochs, %g in 2", r, c, g4, g2)
			}
		}
		if four.StepKernelGFLOP["gemm"] == 0 || four.StepKernelMB["gemm"] >= four.KernelMB["gemm"] || math.Abs(mb-four.StepMB) > 1e-6*mb {
			t.Errorf("rank %d: step GFLOP %v, step MB %v (sum %g, step_mb %g) against all calls' %v: want flops, and less than with evaluation",
				r, four.StepKernelGFLOP, four.StepKernelMB, mb, four.StepMB, four.KernelMB)
		}
	}
	o, err := run(t, 0, "bench", "triad", "--mb", "4", filepath.Join(dir, "r4.json"))
	if err != nil || !strings.Contains(o, "gemm peak") || !strings.Contains(o, "roofline") {
		t.Fatalf("bench triad: %v\n%s", err, o)
	}
}

// TestBenchCommWritesOnlyWhereTold: a benchmark run by hand prints its
// table and leaves no file in the directory it runs from; --out writes it.
func TestBenchCommWritesOnlyWhereTold(t *testing.T) {
	dir := t.TempDir()
	for _, run := range []struct {
		args []string
		file string // what it leaves, if anything
	}{
		{[]string{"bench", "comm", "--max-mib", "1"}, ""},
		{[]string{"bench", "comm", "--max-mib", "1", "--out", "table.json"}, "table.json"},
	} {
		cmd := exec.Command(bin, run.args...)
		cmd.Dir, cmd.Env = dir, mpiEnv()
		if o, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(o), "GB/s by message size") {
			t.Fatalf("sancus %v: %v\n%s", run.args, err, o)
		}
		left, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ok := len(left) == 0 && run.file == "" || len(left) == 1 && left[0].Name() == run.file; !ok {
			t.Errorf("sancus %v left %v in its directory, want %q", run.args, left, run.file)
		}
	}
}

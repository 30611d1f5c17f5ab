package train

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/atomicfile/fulldisk"
	"sancus/src/graph"
	"sancus/src/staleness"
)

func sameBits(t *testing.T, what string, a, b [][]float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d tensors vs %d", what, len(a), len(b))
	}
	for i := range a {
		for k := range a[i] {
			if math.Float32bits(a[i][k]) != math.Float32bits(b[i][k]) {
				t.Fatalf("%s: tensor %d[%d] = %g vs %g", what, i, k, a[i][k], b[i][k])
			}
		}
	}
}

// TestStopAndResumeIsBitIdentical: a run stopped mid-way (as by SIGTERM),
// checkpointed and resumed ends with exactly the weights and curve of an
// uninterrupted run — caches, versions and variation-gap references included.
func TestStopAndResumeIsBitIdentical(t *testing.T) {
	cfg := Defaults()
	cfg.Staleness.Policy, cfg.Staleness.Eps = kind("variation-gap"), 0.03
	checkStopResume(t, cfg)
}

// TestStopAndResumeCacheBits: blocks kept packed, the rank's own included,
// resume bit for bit, stale ones too (a root broadcasts every other
// epoch, so the epoch after the checkpoint reads the copies it holds), at
// 3 layers.
func TestStopAndResumeCacheBits(t *testing.T) {
	cfg := Defaults()
	cfg.Staleness.Policy, cfg.Staleness.Eps, cfg.Model.Layers = kind("epoch-fixed"), 1, 3
	cfg.Wire.Fwd, cfg.Wire.CacheBits = format("int4"), true
	checkStopResume(t, cfg)
}

// TestStopAndResumeWithoutTrainingRows: on Cora's planetoid split every
// training node is in rank 0's half, so rank 1's loss writes no row of the
// logits it reads, and its gradient must be zero from the first epoch a
// resumed run trains (not the logits its training pass computed).
func TestStopAndResumeWithoutTrainingRows(t *testing.T) {
	checkStopResumeOn(t, loadCora(t), Defaults())
}

// checkStopResume stops a 30-epoch, 2-rank run during epoch 13,
// resumes it and compares it with an uninterrupted run bit for bit.
func checkStopResume(t *testing.T, cfg Config) {
	ds, _ := generated(t)
	checkStopResumeOn(t, ds, cfg)
}

func checkStopResumeOn(t *testing.T, ds *graph.Dataset, cfg Config) {
	cfg.Optim.Epochs = 30
	full, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cfg.Run.CheckpointDir, cfg.Run.CheckpointEvery = dir, 5
	var calls atomic.Int32
	cfg.Run.Stop = func() bool { return calls.Add(1) > 2*12 } // "SIGTERM" during epoch 13
	stopped, err := RunInProcess(ds, 2, cfg)
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("want ErrStopped, got %v", err)
	}
	ep, err := LatestCheckpoint(dir)
	if err != nil || ep != len(stopped.Result.Curve) || ep < 12 || ep >= 30 {
		t.Fatalf("latest checkpoint %d (err %v) after %d epochs", ep, err, len(stopped.Result.Curve))
	}
	if old, _ := filepath.Glob(filepath.Join(dir, "epoch-*")); len(old) != 1 {
		t.Fatalf("older checkpoints not cleaned up: %v", old)
	}

	cfg.Run.Stop, cfg.Run.Resume = nil, true
	resumed, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, "resumed vs uninterrupted weights", resumed.Params, full.Params)
	for i, e := range resumed.Result.Curve {
		if e.Loss != full.Result.Curve[i].Loss || e.ValAcc != full.Result.Curve[i].ValAcc {
			t.Fatalf("epoch %d: resumed loss %v val %v, uninterrupted %v %v", e.Epoch, e.Loss, e.ValAcc, full.Result.Curve[i].Loss, full.Result.Curve[i].ValAcc)
		}
	}
	if len(resumed.Result.Curve) != 30 || resumed.Result.TestAtBest != full.Result.TestAtBest {
		t.Fatalf("resumed report: %d epochs, test %v vs %v", len(resumed.Result.Curve), resumed.Result.TestAtBest, full.Result.TestAtBest)
	}
}

func TestResumeRefusesAnotherRun(t *testing.T) {
	ds, _ := generated(t)
	cfg := Defaults()
	cfg.Optim.Epochs, cfg.Run.CheckpointDir, cfg.Run.CheckpointEvery = 4, t.TempDir(), 2
	if _, err := RunInProcess(ds, 2, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Model.Hidden, cfg.Run.Resume = 32, true
	_, err := RunInProcess(ds, 2, cfg)
	if err == nil || !strings.Contains(err.Error(), "different run") {
		t.Fatalf("resuming with another hidden size: %v", err)
	}
	// A corrupt checkpoint is refused, not half-loaded.
	cfg.Model.Hidden = 16
	p := ckptPath(cfg.Run.CheckpointDir, 4, 1, 2)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
	var notices bytes.Buffer
	cfg.Run.Notices = &notices
	_, err = RunInProcess(ds, 2, cfg)
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("corrupt checkpoint: %v", err)
	}
	if strings.Contains(notices.String(), "resumed") {
		t.Fatalf("a resume that failed on one rank was announced: %q", notices.String())
	}
	// A checkpoint of another rank count names both counts.
	cfg.Run.Notices = nil
	b[len(b)/2] ^= 1 // the file whole again
	os.WriteFile(p, b, 0o644)
	if _, err = RunInProcess(ds, 4, cfg); err == nil || !strings.Contains(err.Error(), "written by 2 ranks; this run has 4") {
		t.Fatalf("a checkpoint of 2 ranks resumed on 4: %v", err)
	}
	// A run cannot go back: --epochs below the checkpoint's epoch is refused.
	cfg.Optim.Epochs = 3
	if _, err = RunInProcess(ds, 2, cfg); err == nil || !strings.Contains(err.Error(), "past --epochs 3") {
		t.Fatalf("--epochs 3 from a checkpoint after epoch 4: %v", err)
	}
}

// A checkpoint written when a restricted cache's slots held all of the
// view's rows resumes into slots that hold only the rows read: the held
// rows are taken from it, in their new order; a size that is neither is
// refused with the block named.
func TestRestoreIntoHeldSlots(t *testing.T) {
	be := kernels.CPU{}
	const width = 2
	// Rank 0's view holds 5 rows of root 1; its block reads rows 1 and 3.
	blocks := []*matrix.CSR{
		{Rows: 1, Cols: 1, RowPtr: []int64{0, 1}, ColIdx: []int32{0}, Val: []float32{1}},
		{Rows: 1, Cols: 5, RowPtr: []int64{0, 2}, ColIdx: []int32{1, 3}, Val: []float32{1, 1}},
	}
	c := newCache(be, "test", width, []int{1, 5}, slices.Clone(blocks), staleness.None{}, wireState{}, 0, nil)
	if err := c.hold(be, [][]int32{nil, {1, 3}}, [][]int64{{0}, {10, 11, 12, 13, 14}}); err != nil {
		t.Fatal(err)
	}
	ids := c.heldIDs(1, []int64{10, 11, 12, 13, 14})
	if c.rows[1] != 2 || !slices.Equal(ids, []int64{11, 13}) || !slices.Equal(c.blocks[1].ColIdx, []int32{0, 1}) {
		t.Fatalf("held slot: rows %d ids %v columns %v", c.rows[1], ids, c.blocks[1].ColIdx)
	}
	old := ckptLayer{Bufs: [][]float32{{7, 7}, {0, 0, 1, 1, 2, 2, 3, 3, 4, 4}}, Last: []int{3, 3}}
	if err := restoreCache(be, c, old); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.host[1], []float32{1, 1, 3, 3}) || !slices.Equal(c.host[0], []float32{7, 7}) {
		t.Fatalf("restored slots %v %v", c.host[0], c.host[1])
	}
	old.Bufs[1] = old.Bufs[1][:6]
	if err := restoreCache(be, c, old); err == nil || !strings.Contains(err.Error(), "block 1 has 6 values, run expects 4") {
		t.Fatalf("a checkpoint of another size: %v", err)
	}
}

// trainThroughFailingCheckpoints trains the generated graph at P = 2 for
// 12 epochs with a checkpoint every 4 into dir, and checks that training
// went on to the losses of a run without checkpoints and said so; it
// returns the run's write errors.
func trainThroughFailingCheckpoints(t *testing.T, dir string) []string {
	t.Helper()
	ds, _ := generated(t)
	cfg := Defaults()
	cfg.Optim.Epochs = 12
	ref, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Run.CheckpointDir, cfg.Run.CheckpointEvery = dir, 4
	var notices bytes.Buffer
	cfg.Run.Notices = &notices
	out, err := RunInProcess(ds, 2, cfg)
	if err != nil {
		t.Fatalf("a failed checkpoint ended the run: %v", err)
	}
	sameCurve(t, "with failed checkpoints", out.Result, ref.Result, 0)
	if !strings.Contains(notices.String(), "training goes on") {
		t.Fatalf("the failure was not reported: %q", notices.String())
	}
	return out.Result.WriteErrors
}

// TestCheckpointFailureKeepsTraining: a checkpoint that cannot be written
// (a directory in the way of epoch 4's file) is recorded and said,
// training goes on, and the next checkpoint commits.
func TestCheckpointFailureKeepsTraining(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(ckptPath(dir, 4, 1, 2), 0o755); err != nil {
		t.Fatal(err)
	}
	errs := trainThroughFailingCheckpoints(t, dir)
	if len(errs) != 1 || !strings.Contains(errs[0], "epoch 4 failed (rank 1: checkpoint: writing") {
		t.Fatalf("write errors %q", errs)
	}
	if ep, err := LatestCheckpoint(dir); err != nil || ep != 12 {
		t.Fatalf("LATEST is %d (%v), want 12", ep, err)
	}
	if _, err := os.Stat(filepath.Dir(ckptPath(dir, 4, 0, 2))); err == nil {
		t.Fatal("the failed epoch's partial checkpoint was left behind")
	}
}

// TestCheckpointOnAFullDisk: the checkpoint directory on a real full disk
// (a 16 KB tmpfs): every checkpoint fails for want of space and is
// recorded, training goes on, and no partial checkpoint or temporary file
// is left.
func TestCheckpointOnAFullDisk(t *testing.T) {
	dir := fulldisk.Dir(t, "16k")
	if errs := trainThroughFailingCheckpoints(t, dir); len(errs) != 3 || !strings.Contains(strings.Join(errs, "|"), "no space left on device") {
		t.Fatalf("write errors %q, want three naming the full disk", errs)
	}
	left, _ := os.ReadDir(dir)
	for _, e := range left {
		if e.Name() != ".lock" {
			t.Fatalf("%s was left on the full disk", e.Name())
		}
	}
}

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sancus/launch"
	"sancus/src/shard"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/pflag"

	"sancus/src/train"
)

// Faults that lose work or mislead, case by case: each must end clearly.

// TestDivergedRunKeepsItsReport: --lr 1e30 (NaN losses) and --lr 1e6 (a
// loss of 8e5) end as diverged, with a report JSON can encode.
func TestDivergedRunKeepsItsReport(t *testing.T) {
	dir := t.TempDir()
	for _, lr := range []string{"1e30", "1e6"} {
		out := filepath.Join(dir, "r"+lr+".json")
		o, err := run(t, 0, "train", "--data", cora, "--epochs", "50", "--quiet", "--lr", lr, "--out", out)
		if exitCode(err) != launch.ExitDiverged || !strings.Contains(o, "diverged at epoch") {
			t.Fatalf("--lr %s: exit %d, want %d and the epoch named:\n%s", lr, exitCode(err), launch.ExitDiverged, o)
		}
		rep := readReport(t, out)
		if rep.Result.Status != "diverged" || len(rep.Result.Curve) == 0 || !strings.Contains(rep.Result.Error, "layer") && lr == "1e30" {
			t.Fatalf("--lr %s: report status %q error %q, %d epochs", lr, rep.Result.Status, rep.Result.Error, len(rep.Result.Curve))
		}
	}
}

// TestOutputsAreCheckedFirst: an --out that cannot be written is found
// out before training, not after it, which would lose the run.
func TestOutputsAreCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct{ flag, path, want string }{
		{"--out", "/proc/sancus/r.json", "--out"},
		{"--out", filepath.Join(file, "r.json"), "--out"},
		{"--out", dir, "is a directory"},
		{"--save-weights", filepath.Join(file, "w.bin"), "--save-weights"},
		{"--checkpoint-dir", filepath.Join(file, "ck"), "--checkpoint-dir"},
	} {
		o, err := run(t, 0, "train", "--data", cora, "--epochs", "200", c.flag, c.path)
		if err == nil || !strings.Contains(o, c.want) || strings.Contains(o, "epoch    1") {
			t.Fatalf("%s %s: err %v, want a refusal saying %q before any epoch:\n%s", c.flag, c.path, err, c.want, o)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestFailedPrepareLeavesNoDirectory: prepare on a malformed graph used to
// leave an empty output directory behind.
func TestFailedPrepareLeavesNoDirectory(t *testing.T) {
	dir := t.TempDir()
	data := writeDataset(t, filepath.Join(dir, "bad"), map[string]string{
		"graph.mtx":  "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n9 2\n",
		"labels.txt": "0\n1\n0\n"})
	out := filepath.Join(dir, "shards")
	o, err := run(t, 0, "prepare", "--data", data, "--parts", "2", "--out", out)
	if err == nil || !strings.Contains(o, "graph.mtx:4") {
		t.Fatalf("malformed graph: err %v\n%s", err, o)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("a failed prepare left %s behind", out)
	}
}

// TestBadFlagValuesAreRefused: values that would train and then report
// 0.0000 accuracy or nothing are refused, naming the flag.
func TestBadFlagValuesAreRefused(t *testing.T) {
	dir := t.TempDir()
	overlap := writeDataset(t, filepath.Join(dir, "overlap"), map[string]string{
		"graph.mtx":  "%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n2 1\n3 2\n4 3\n",
		"labels.txt": "0\n1\n0\n1\n", "train.txt": "0\n1\n", "test.txt": "1\n2\n"})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--epochs", "0"}, "epochs must be ≥ 1"},
		{[]string{"--eval-every", "-1"}, "a number of epochs (0: after the last only) or auto"},
		{[]string{"--threads", "-1"}, "--threads must be ≥ 0"},
		{[]string{"--threads", "100000"}, "kernel threads a rank on this machine"},
		{[]string{"--ranks", "1000000"}, "start more with mpirun or srun"},
		{[]string{"--classes", "-3"}, `"--classes" flag`},
		{[]string{"--split", "bogus"}, `unknown split "bogus"`},
		{[]string{"--comm-timeout", "0s"}, "--comm-timeout must be > 0"},
		{[]string{"--dropout", "nan"}, "dropout must be in [0,1)"},
		{[]string{"--staleness", "variation-gap", "--eps", "-1"}, "--eps must be ≥ 0"},
	} {
		o, err := run(t, 0, append([]string{"train", "--data", cora}, c.args...)...)
		if err == nil || !strings.Contains(o, c.want) {
			t.Errorf("train %v: err %v, want it to say %q:\n%s", c.args, err, c.want, o)
		}
	}
	o, err := run(t, 0, "train", "--data", overlap, "--epochs", "3")
	if err == nil || !strings.Contains(o, "test.txt: node 1 is also in train.txt") {
		t.Errorf("overlapping splits: err %v\n%s", err, o)
	}
	// --eval-every 0 still reports accuracy: it evaluates after the last epoch.
	out := filepath.Join(dir, "r.json")
	if o, err := run(t, 0, "train", "--data", cora, "--epochs", "30", "--eval-every", "0", "--quiet", "--out", out); err != nil {
		t.Fatalf("--eval-every 0: %v\n%s", err, o)
	}
	if r := readReport(t, out).Result; r.FinalTestAcc < 0.3 || !r.Curve[len(r.Curve)-1].Evaluated {
		t.Fatalf("--eval-every 0: final test accuracy %v", r.FinalTestAcc)
	}
}

// TestHelpAndDefaults: help goes to stdout with status 0, placeholders are
// words, and variation-gap without --eps uses its documented bound.
func TestHelpAndDefaults(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"train", "--help"}, {"prepare", "-h"}} {
		cmd := exec.Command(bin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stdout.Len() == 0 || stderr.Len() != 0 {
			t.Fatalf("sancus %v: err %v, %d bytes on stdout, stderr %q", args, err, stdout.Len(), stderr.String())
		}
		if strings.Contains(stdout.String(), "make cuda ") && strings.Contains(stdout.String(), "--device make cuda") {
			t.Fatalf("sancus %v: placeholder is a phrase:\n%s", args, stdout.String())
		}
	}
	cmd := exec.Command(bin, "train", "--help")
	b, _ := cmd.Output()
	for _, want := range []string{"--data DIR", "--out FILE", "--checkpoint-dir DIR", "ε_H; default 0.03"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("train --help lacks %q", want)
		}
	}
	out := filepath.Join(t.TempDir(), "r.json")
	if o, err := run(t, 0, "train", "--data", cora, "--ranks", "2", "--epochs", "200", "--quiet", "--staleness", "variation-gap", "--out", out); err != nil {
		t.Fatalf("variation-gap without --eps: %v\n%s", err, o)
	}
	skipped := 0
	for _, e := range readReport(t, out).Result.Curve {
		skipped += e.Skipped
	}
	if skipped == 0 {
		t.Fatal("variation-gap without --eps never skipped a broadcast")
	}
}

// TestSIGTERMToMpirunResumesFromLastCompleteCheckpoint: mpirun aborts a job
// on SIGTERM (it cannot forward it); --resume used to start again at epoch
// 1 silently. Now it continues from the last complete checkpoint and says
// so — and sancus launch turns the same SIGTERM into a clean stop.
func TestSIGTERMToMpirunResumesFromLastCompleteCheckpoint(t *testing.T) {
	mpirun := needMPI(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	args := []string{"train", "--data", cora, "--epochs", forever, "--checkpoint-dir", ck, "--checkpoint-every", "20", "--out", filepath.Join(dir, "r.json")}
	cmd := exec.Command(mpirun, append([]string{"-np", "2", bin}, args...)...)
	cmd.Env = mpiEnv()
	wait := startUntil(t, cmd, "checkpoint: "+ck+" after epoch 40")
	cmd.Process.Signal(syscall.SIGTERM)
	out, err := wait()
	if err == nil {
		t.Fatalf("mpirun after SIGTERM exited 0:\n%s", out)
	}
	latest, _ := os.ReadFile(filepath.Join(ck, "LATEST")) // the run went on past epoch 40 before mpirun ended it
	o, _ := run(t, 2, append(args, "--epochs", strings.TrimSpace(string(latest)), "--resume", "--quiet")...)
	if !strings.Contains(o, "resumed from "+ck+" after epoch") {
		t.Fatalf("resume did not say where it continued:\n%s", o)
	}
	// Only an incomplete checkpoint: said, not silent.
	empty := filepath.Join(dir, "ck2")
	os.MkdirAll(filepath.Join(empty, "epoch-000071"), 0o755)
	os.WriteFile(filepath.Join(empty, "epoch-000071", "rank-00000-of-00002.ckpt"), []byte("x"), 0o644)
	o, err = run(t, 0, "train", "--data", cora, "--ranks", "2", "--epochs", "2", "--checkpoint-dir", empty, "--resume", "--quiet", "--out", filepath.Join(dir, "r2.json"))
	if err != nil || !strings.Contains(o, "epoch-000071 holds 1 of 2 rank files") || !strings.Contains(o, "starting from epoch 1") {
		t.Fatalf("incomplete checkpoint: %v\n%s", err, o)
	}
	// Through sancus launch, the SIGTERM becomes SIGUSR1 for mpirun: a
	// clean stop with a checkpoint and exit 85.
	args[len(args)-1] = filepath.Join(dir, "r3.json")
	ck3 := filepath.Join(dir, "ck3")
	args[6] = ck3
	cmd = exec.Command(bin, append([]string{"launch", "-n", "2", "--via", "mpirun", "--"}, args...)...)
	cmd.Env = mpiEnv()
	wait = startUntil(t, cmd, "epoch   30")
	// mpirun's session directory is in a base of the launch's own, not
	// in the TMPDIR every job on the node shares.
	session, _ := filepath.Glob(filepath.Join(os.TempDir(), "sancus-mpirun-*", "ompi.*"))
	cmd.Process.Signal(syscall.SIGTERM)
	out, err = wait()
	if exitCode(err) != launch.ExitRequeue || !strings.Contains(out, "checkpoint committed") {
		t.Fatalf("sancus launch with SIGTERM: exit %d, want %d:\n%s", exitCode(err), launch.ExitRequeue, out)
	}
	if len(session) != 1 {
		t.Fatalf("mpirun's session directories in sancus launch's base: %v, want one", session)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "sancus-mpirun-*")); len(left) > 0 {
		t.Fatalf("sancus launch left %v", left)
	}
}

// writeDataset makes a dataset directory of the given files.
func writeDataset(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTrainHelpIsGrouped: train --help lists every flag exactly once, each
// under a section title, with an example before the first section.
func TestTrainHelpIsGrouped(t *testing.T) {
	b, err := exec.Command(bin, "train", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	help := string(b)
	if !strings.Contains(help, "Example:\n  mpirun") {
		t.Fatalf("train --help has no example:\n%s", help)
	}
	var tf trainFlags
	cfg := train.Defaults()
	all := trainFlagSet(&cfg, &tf)
	seen, section, sections := map[string]int{}, "", 0
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			section = line
			if line != "Example:" {
				sections++
			}
		case strings.HasPrefix(strings.TrimSpace(line), "--"):
			name := strings.TrimPrefix(strings.Fields(line)[0], "--")
			name, _, _ = strings.Cut(name, "[")
			if section == "" || section == "Example:" {
				t.Errorf("--%s is listed outside a section", name)
			}
			seen[name]++
		}
	}
	all.VisitAll(func(f *pflag.Flag) {
		if seen[f.Name] != 1 {
			t.Errorf("--%s appears %d times in train --help", f.Name, seen[f.Name])
		}
		delete(seen, f.Name)
	})
	for name := range seen {
		t.Errorf("train --help lists --%s, which train does not take", name)
	}
	if sections < 8 {
		t.Errorf("train --help has %d sections", sections)
	}
}

// TestFailedModelWriteKeepsTheResults: a --save-model that fails at the end
// (its directory gone) is reported and recorded, and the results JSON is
// written all the same; the run exits 1.
func TestFailedModelWriteKeepsTheResults(t *testing.T) {
	dir := t.TempDir()
	sub, out := filepath.Join(dir, "models"), filepath.Join(dir, "r.json")
	cmd := exec.Command(bin, "train", "--data", cora, "--epochs", "400", "--eval-every", "0", "--save-model", filepath.Join(sub, "m.sancus"), "--out", out)
	// The run prints a line an epoch: held at epoch 5 by its full output
	// pipe, it cannot reach its end while the directory goes.
	wait, _ := startHeld(t, cmd, "epoch    5", true)
	os.RemoveAll(sub)
	os.WriteFile(sub, []byte("a file where the model's directory was"), 0o644)
	o, err := wait()
	if exitCode(err) != 1 || !strings.Contains(o, "--save-model") {
		t.Fatalf("exit %d:\n%s", exitCode(err), o)
	}
	rep := readReport(t, out)
	if rep.Result.Status != "completed" || len(rep.Result.WriteErrors) != 1 || !strings.Contains(rep.Result.WriteErrors[0], "--save-model") {
		t.Fatalf("results JSON: status %q, write errors %q", rep.Result.Status, rep.Result.WriteErrors)
	}
}

// TestFailedPredictLeavesNoStaleIndex: a predict that fails after it
// started on an output directory leaves no index.json naming the files of
// the run before.
func TestFailedPredictLeavesNoStaleIndex(t *testing.T) {
	dir := t.TempDir()
	m, pred := filepath.Join(dir, "m.sancus"), filepath.Join(dir, "pred")
	if o, err := run(t, 0, "train", "--data", cora, "--epochs", "3", "--quiet", "--save-model", m, "--out", filepath.Join(dir, "r.json")); err != nil {
		t.Fatalf("train: %v\n%s", err, o)
	}
	if o, err := run(t, 0, "predict", "--model-file", m, "--data", cora, "--out", pred); err != nil {
		t.Fatalf("predict: %v\n%s", err, o)
	}
	if o, err := run(t, 0, "predict", "--model-file", m, "--data", filepath.Join(dir, "no-such-data"), "--out", pred); err == nil {
		t.Fatalf("predict on missing data succeeded:\n%s", o)
	}
	if _, err := os.Stat(filepath.Join(pred, "index.json")); err == nil {
		t.Fatal("a failed predict left the previous run's index.json")
	}
}

// TestInertFlagsAreRefused: every flag of the inert table, given without
// the setting it needs, is refused naming itself; with that setting it is
// not refused for being inert.
func TestInertFlagsAreRefused(t *testing.T) {
	value := map[string]string{"native-bcast": "true", "chunk": "1000", "device-comm": "host", "exchange-chunk": "8192",
		"heads": "2", "out-heads": "2", "att-dropout": "0.1", "clusters-per-step": "4", "boundary": "true", "eps": "1",
		"max-stale": "5", "skip-gradients": "true", "wire-error": "0.1", "clip-scale": "2", "normalize-features": "false",
		"split": "planetoid", "split-seed": "3", "split-name": "x", "checkpoint-every": "5", "resume": "true", "classes": "7",
		"fanouts": "5,5", "batch-size": "10", "batch-draw": "global", "sample-ahead": "false",
		"migrate": "model", "pregather": "true", "merge-micrographs": "1"}
	value["save-model-at"] = "last"
	context := map[string][]string{"exchange-chunk": {"--dense-bcast"}, "normalize-features": {"--shards", "no-such-dir"},
		"split": {"--shards", "no-such-dir"}, "split-seed": {"--shards", "no-such-dir"}, "split-name": {"--shards", "no-such-dir"}, "classes": {"--shards", "no-such-dir"}}
	seen := map[string]bool{} // a flag inert in two ways is in two rows
	for _, r := range inert {
		for _, f := range r.flags {
			v, ok := value[f]
			if !ok {
				t.Fatalf("no test value for --%s", f)
			}
			args := []string{"train", "--epochs", "1", "--out", filepath.Join(t.TempDir(), "r.json"), "--" + f + "=" + v}
			if c, ok := context[f]; ok {
				args = append(args, c...)
			}
			if !slices.Contains(args, "--shards") {
				args = append(args, "--data", cora)
			}
			o, err := run(t, 0, args...)
			if err == nil || !strings.Contains(o, "--"+f+" does nothing without") {
				t.Errorf("--%s=%s without %s: %v\n%s", f, v, r.needs, err, o)
			}
			seen[f] = true
		}
	}
	if len(seen) != len(value) {
		t.Errorf("tested %d inert flags, have values for %d", len(seen), len(value))
	}
	if o, err := run(t, 0, "train", "--data", cora, "--epochs", "1", "--quiet", "--out", filepath.Join(t.TempDir(), "r.json"),
		"--model", "gat", "--heads", "2", "--staleness", "epoch-fixed", "--eps", "2", "--clip", "1", "--clip-scale", "2"); err != nil {
		t.Fatalf("flags with what they need: %v\n%s", err, o)
	}
}

// TestMixedShardSetIsRefused: a shard of another prepare (here one with
// --normalize-features=false) dropped into a shard directory is refused
// before training, naming the ranks, in-process and under mpirun with
// --dense-bcast (which used to hang until --comm-timeout).
func TestMixedShardSetIsRefused(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for out, extra := range map[string][]string{a: nil, b: {"--normalize-features=false"}} {
		if o, err := run(t, 0, append([]string{"prepare", "--data", cora, "--parts", "2", "--out", out}, extra...)...); err != nil {
			t.Fatalf("prepare: %v\n%s", err, o)
		}
	}
	other, err := os.ReadFile(filepath.Join(b, shard.FileName(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(a, shard.FileName(1, 2)), other, 0o644)
	args := []string{"train", "--shards", a, "--epochs", "2", "--quiet", "--out", filepath.Join(dir, "r.json"), "--comm-timeout", "2m"}
	if o, err := run(t, 0, append(args, "--ranks", "2")...); err == nil || !strings.Contains(o, "rank 1's shard and rank 0's come from different preparations") {
		t.Fatalf("in-process on a mixed shard set: %v\n%s", err, o)
	}
	if _, err := exec.LookPath("mpirun"); err == nil {
		if o, err := run(t, 2, append(args, "--dense-bcast")...); err == nil || !strings.Contains(o, "different preparations") { // a hang would end in the 2-minute timeout, not this refusal
			t.Fatalf("mpirun --dense-bcast on a mixed shard set: %v\n%s", err, o)
		}
	}
}

// TestTypedChoicesAsAUserWritesThem: a choice is parsed once, in any case
// and by any alias, and what the run records is what it trained:
// --wire AUTO is auto (its --wire-error is not refused as inert), and
// --staleness h is variation-gap with its own bound, ε_H = 0.03.
func TestTypedChoicesAsAUserWritesThem(t *testing.T) {
	dir := t.TempDir()
	auto, h := filepath.Join(dir, "auto.json"), filepath.Join(dir, "h.json")
	if o, err := run(t, 0, "train", "--data", cora, "--ranks", "2", "--epochs", "3", "--quiet", "--wire", "AUTO", "--wire-error", "0.1", "--out", auto); err != nil {
		t.Fatalf("--wire AUTO --wire-error 0.1: %v\n%s", err, o)
	}
	if s := readReport(t, auto).Settings; s.Wire != "auto" {
		t.Errorf("--wire AUTO recorded as %q", s.Wire)
	}
	if o, err := run(t, 0, "train", "--data", cora, "--ranks", "2", "--epochs", "3", "--quiet", "--staleness", "h", "--out", h); err != nil {
		t.Fatalf("--staleness h: %v\n%s", err, o)
	}
	if s := readReport(t, h).Settings; s.Staleness != "variation-gap" || s.Eps != 0.03 {
		t.Errorf("--staleness h recorded as %q with ε %g, want variation-gap with 0.03", s.Staleness, s.Eps)
	}
}

// TestUnknownFlagSaysWhatWasMeant: a mistyped flag is refused naming the
// flag it is closest to, in every command.
func TestUnknownFlagSaysWhatWasMeant(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"train --epoch 3", "did you mean --epochs?"}, {"prepare --part 3", "did you mean --parts?"},
		{"gen --nodez 3", "did you mean --nodes?"}, {"train --zzzzzz", "unknown flag: --zzzzzz\n"},
	} {
		o, err := run(t, 0, strings.Fields(c.args)...)
		if err == nil || !strings.Contains(o, c.want) {
			t.Errorf("sancus %s: %v\n%s", c.args, err, o)
		}
	}
}

// TestLoadFlagsRefusedEverywhere: --classes below 0 and an unknown --split
// are refused at the flag by every command that reads a dataset, even one
// that ships its own split.
func TestLoadFlagsRefusedEverywhere(t *testing.T) {
	out := filepath.Join(t.TempDir(), "shards")
	for _, args := range [][]string{
		{"prepare", "--data", cora, "--parts", "2", "--out", out, "--split", "bogus"},
		{"prepare", "--data", cora, "--parts", "2", "--out", out, "--classes", "-3"},
		{"info", "--split", "bogus", cora}, {"info", "--classes", "-3", cora},
	} {
		if o, err := run(t, 0, args...); err == nil || !strings.Contains(o, "flag") {
			t.Errorf("sancus %v: %v\n%s", args, err, o)
		}
	}
}

// TestPrepareWarnsOfUnbalancedTraining: Cora cut contiguously puts all its
// training nodes on part 0, which prepare says, naming the fix; a random
// cut spreads them and draws no warning, and so does the contiguous cut
// with --balance-by train, 70 training nodes a part.
func TestPrepareWarnsOfUnbalancedTraining(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct {
		flags []string
		warns bool
	}{{[]string{"--partitioner", "contiguous"}, true}, {[]string{"--partitioner", "random"}, false}, {[]string{"--balance-by", "train"}, false}} {
		o, err := run(t, 0, append([]string{"prepare", "--data", cora, "--parts", "2", "--out", filepath.Join(dir, fmt.Sprint(i))}, c.flags...)...)
		if err != nil || strings.Contains(o, "training nodes are unbalanced") != c.warns || (c.warns && !strings.Contains(o, "[140 0]")) {
			t.Errorf("prepare %v: %v, warned %v, want %v:\n%s", c.flags, err, !c.warns, c.warns, o)
		}
	}
	info, err := run(t, 0, "info", filepath.Join(dir, "2"))
	if err != nil || strings.Count(info, ": rows ") != 2 || strings.Count(info, "(1354), 70 training nodes") != 2 {
		t.Errorf("info of the shards prepared with --balance-by train: %v\n%s", err, info)
	}
}

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"sancus/src/shard"
)

// TestShardDirRefusedAlike: train and info refuse a shard directory whose
// meta.json is missing or unsound in the same words, and info does not
// take one without meta.json for a dataset.
func TestShardDirRefusedAlike(t *testing.T) {
	good := filepath.Join(t.TempDir(), "sh")
	if o, err := run(t, 0, "prepare", "--quiet", "--data", cora, "--parts", "2", "--out", good); err != nil {
		t.Fatalf("prepare: %v\n%s", err, o)
	}
	meta, err := os.ReadFile(filepath.Join(good, shard.MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		meta string // "": none
		want string
	}{
		{"missing", "", "has no meta.json"},
		{"garbage", "{garbage", "invalid character"},
		{"nested", strings.Repeat("[", 100000) + strings.Repeat("]", 100000), "exceeded max depth"},
		{"parts", strings.Replace(string(meta), `"parts": 2`, `"parts": 4`, 1), "parts 4, but 3 offsets"},
	} {
		dir := filepath.Join(t.TempDir(), c.name)
		os.Mkdir(dir, 0o755)
		for r := range 2 {
			b, _ := os.ReadFile(filepath.Join(good, shard.FileName(r, 2)))
			os.WriteFile(filepath.Join(dir, shard.FileName(r, 2)), b, 0o644)
		}
		if c.meta != "" {
			os.WriteFile(filepath.Join(dir, shard.MetaFile), []byte(c.meta), 0o644)
		}
		io, err := run(t, 0, "info", dir)
		m := regexp.MustCompile(`NOT usable: (shard directory .*)`).FindStringSubmatch(io)
		if err == nil || m == nil || !strings.Contains(m[1], c.want) {
			t.Errorf("%s: info: %v\n%s", c.name, err, io)
			continue
		}
		to, err := run(t, 0, "train", "--shards", dir, "--ranks", "2", "--epochs", "1", "--quiet", "--out", filepath.Join(t.TempDir(), "r.json"))
		if err == nil || !strings.Contains(to, m[1]) {
			t.Errorf("%s: train does not refuse as info does (%q): %v\n%s", c.name, m[1], err, to)
		}
	}
}

// TestInfoRefusesUnusableInputs: info reads what a run would refuse, and
// says so: a graph without edges, a feature matrix without columns, a
// FIFO for a model file, here and in predict.
func TestInfoRefusesUnusableInputs(t *testing.T) {
	empty := dataset(t, map[string]string{"edges.txt": "# no edges yet\n"})
	nofeat := dataset(t, map[string]string{
		"graph.mtx":    "%%MatrixMarket matrix coordinate pattern symmetric\n6 6 5\n2 1\n3 2\n4 3\n5 4\n6 5\n",
		"labels.txt":   "0\n1\n0\n1\n0\n1\n",
		"features.mtx": "%%MatrixMarket matrix coordinate real general\n6 0 0\n"})
	fifo := filepath.Join(t.TempDir(), "m.model")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	for _, c := range []struct{ path, want string }{
		{empty, "edges.txt:1: unexpected end of file: no edges"},
		{nofeat, "features.mtx:2: the size line declares 0 feature columns"},
		{fifo, "m.model: a FIFO, not a regular file"},
	} {
		o, err := run(t, 0, "info", c.path)
		if exitCode(err) != 1 || !strings.Contains(o, "NOT usable") || !strings.Contains(o, c.want) {
			t.Errorf("info %s: exit %d, want NOT usable and %q:\n%s", c.path, exitCode(err), c.want, o)
		}
	}
	o, err := run(t, 0, "predict", "--model-file", fifo, "--data", cora, "--out", t.TempDir())
	if err == nil || !strings.Contains(o, "a FIFO, not a regular file") {
		t.Errorf("predict on a FIFO model file: %v\n%s", err, o)
	}
}

// TestLaunchRefusesBeforeStartingRanks: what would fail on every rank at
// once is refused before mpirun starts any.
func TestLaunchRefusesBeforeStartingRanks(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trian", "--data", "d"}, "did you mean train"},
		{[]string{"gen", "--out", "d"}, "runs in one process"},
		{[]string{"launch", "-n", "2", "--", "train"}, "each launch a job"},
		{[]string{"train", "--data", "d", "--ranks=4"}, "drop --ranks"},
	} {
		if err := launchable(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("launch -- %v: %v, want %q", c.args, err, c.want)
		}
	}
	if err := launchable([]string{"train", "--data", "d", "--", "--ranks"}); err != nil {
		t.Errorf("an argument after -- is not a flag: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "shards")
	if out, err := run(t, 0, "prepare", "--data", cora, "--parts", "2", "--out", dir); err != nil {
		t.Fatalf("prepare: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"train", "--shards", dir}, {"train", "--shards=" + dir}} {
		if err := shardsFit(args, 2); err != nil {
			t.Errorf("%v on 2 ranks: %v", args, err)
		}
		if err := shardsFit(args, 3); err == nil || !strings.Contains(err.Error(), "holds 2 parts") {
			t.Errorf("%v on 3 ranks: %v", args, err)
		}
	}
}

// TestTinySplitsAreNamed: a split of a few nodes, whose accuracy moves in
// large steps, is said before training.
func TestTinySplitsAreNamed(t *testing.T) {
	karate := filepath.Join(filepath.Dir(cora), "karate")
	out, err := run(t, 0, "train", "--data", karate, "--epochs", "1", "--quiet", "--out", filepath.Join(t.TempDir(), "r.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"3 training nodes", "3 validation nodes"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "test nodes") {
		t.Errorf("karate's 28 test nodes called tiny:\n%s", out)
	}
}

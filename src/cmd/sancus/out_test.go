package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// --out is a file in some commands and a directory in others: each says
// which in its help, and refuses a path of the other kind before any work,
// naming --out, what it expected and what to give.
func TestOutKindIsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "taken.json")
	if err := os.WriteFile(file, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh") + "/" // not there: a directory all the same
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"train", "--data", cora, "--out", dir}, "--out names the results JSON file; " + dir + " is a directory: give " + filepath.Join(dir, "run.json")},
		{[]string{"train", "--data", cora, "--out", fresh}, "--out names the results JSON file; " + fresh + " ends in /, a directory: give " + filepath.Join(fresh, "run.json")},
		{[]string{"plan", "--data", cora, "--calibrate", "--out", dir}, "--out names the table's file (.json or .tsv); " + dir + " is a directory: give " + filepath.Join(dir, "plan.json")},
		{[]string{"bench", "kernels", "--data", cora, "--out", dir}, "--out names the figures' JSON file; " + dir + " is a directory"},
		{[]string{"bench", "comm", "--out", dir}, "--out names the table's JSON file; " + dir + " is a directory"},
		{[]string{"bench", "rank", "--data", cora, "--parts", "2", "--out", dir}, "--out names the figures' JSON file; " + dir + " is a directory"},
		{[]string{"partition-stats", "--data", cora, "--parts", "2", "--out", dir}, "--out names the file the figures are appended to (JSON lines); " + dir + " is a directory"},
		{[]string{"export-metis", "--data", cora, "--out", dir}, "--out names the METIS graph file; " + dir + " is a directory: give " + filepath.Join(dir, "cora.graph")},
		{[]string{"gen", "--nodes", "100", "--edges", "300", "--out", file}, "--out names the dataset directory gen writes; " + file + " is a file, not a directory: give a directory, e.g. " + strings.TrimSuffix(file, ".json")},
		{[]string{"prepare", "--data", cora, "--parts", "2", "--out", file}, "--out names the shard directory prepare writes; " + file + " is a file, not a directory"},
		{[]string{"prepare", "--data", cora, "--parts", "2", "--out", filepath.Join(dir, "shards.json")}, "--out names the shard directory prepare writes; " + filepath.Join(dir, "shards.json") + " is named as a file: give a directory, e.g. " + filepath.Join(dir, "shards")},
		{[]string{"predict", "--model-file", filepath.Join(dir, "none.sancus"), "--data", cora, "--out", file}, "--out names the directory predict writes its .npy files and index.json in; " + file + " is a file"},
	}
	for _, c := range cases {
		out, err := run(t, 0, c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("sancus %v: err %v, output %q; want it to say %q", c.args, err, out, c.want)
		}
		if strings.Contains(out, "epoch") || strings.Contains(out, "generat") {
			t.Errorf("sancus %v worked before refusing --out: %q", c.args, out)
		}
	}
	// Nothing was written: the file is as it was, the directory holds it alone.
	if b, _ := os.ReadFile(file); string(b) != "keep\n" {
		t.Errorf("%s was changed: %q", file, b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%s holds %d entries after the refusals, want 1 (taken.json)", dir, len(ents))
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Errorf("%s was created", fresh)
	}
}

// Every command's --out help names its kind as the metavar.
func TestOutHelpNamesFileOrDir(t *testing.T) {
	for _, c := range []struct {
		args []string
		kind string
	}{
		{[]string{"train"}, "FILE"}, {[]string{"plan"}, "FILE"}, {[]string{"bench", "kernels"}, "FILE"},
		{[]string{"bench", "comm"}, "FILE"}, {[]string{"bench", "rank"}, "FILE"}, {[]string{"partition-stats"}, "FILE"},
		{[]string{"export-metis"}, "FILE"}, {[]string{"gen"}, "DIR"}, {[]string{"prepare"}, "DIR"}, {[]string{"predict"}, "DIR"},
	} {
		out, err := run(t, 0, append(c.args, "--help")...)
		if err != nil {
			t.Errorf("sancus %v --help: %v\n%s", c.args, err, out)
			continue
		}
		if !regexp.MustCompile(`(?m)^\s+--out ` + c.kind + `\s`).MatchString(out) {
			t.Errorf("sancus %v --help: want a line \"--out %s …\"; got\n%s", c.args, c.kind, out)
		}
	}
}

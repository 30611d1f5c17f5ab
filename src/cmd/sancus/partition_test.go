package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// splitsRow runs partition-stats --row on Cora at P = 4 and returns its
// ROW-SPLITS figures: train, val, test balance, edge cut, sampled local,
// micrograph local.
func splitsRow(t *testing.T, args ...string) []float64 {
	t.Helper()
	o, err := run(t, 0, append([]string{"partition-stats", "--data", cora, "--parts", "4", "--row", "--fanouts", "10,5"}, args...)...)
	if err != nil {
		t.Fatalf("partition-stats %v: %v\n%s", args, err, o)
	}
	for _, line := range strings.Split(o, "\n") {
		f := strings.Split(line, "\t")
		if f[0] != "ROW-SPLITS" || len(f) != 10 {
			continue
		}
		var xs []float64
		for _, s := range f[4:] {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("ROW-SPLITS %q: %v", line, err)
			}
			xs = append(xs, x)
		}
		return xs
	}
	t.Fatalf("partition-stats %v: no ROW-SPLITS line:\n%s", args, o)
	return nil
}

// TestByteGNNPartitionerFromTheCommandLine: on Cora (training nodes
// first, a third of the nodes in no split), partition-stats --partitioner
// bytegnn reads the split and reports each split's count within 5% across
// 4 parts and more sampled neighbours local than contiguous ranges; prepare
// writes its shards without the unbalanced-training warning and records
// the partitioner.
func TestByteGNNPartitionerFromTheCommandLine(t *testing.T) {
	b := splitsRow(t, "--partitioner", "bytegnn")
	c := splitsRow(t, "--partitioner", "contiguous")
	t.Logf("bytegnn %v, contiguous %v (train, val, test balance, edge cut, sampled local)", b, c)
	for i, name := range []string{"train", "val", "test"} {
		if b[i] > 1.05 {
			t.Errorf("bytegnn: %s max/mean %.3f, want ≤ 1.05", name, b[i])
		}
	}
	if c[0] < 1.5 {
		t.Errorf("contiguous: train max/mean %.3f: Cora's training nodes come first, so it should be far off", c[0])
	}
	if !(b[4] > c[4]) {
		t.Errorf("sampled neighbours local: bytegnn %.3f, contiguous %.3f", b[4], c[4])
	}
	if !(b[5] > c[5]) {
		t.Errorf("micrograph vertices in their root's part: bytegnn %.3f, contiguous %.3f", b[5], c[5])
	}
	out := filepath.Join(t.TempDir(), "shards")
	o, err := run(t, 0, "prepare", "--data", cora, "--parts", "2", "--partitioner", "bytegnn", "--out", out)
	if err != nil || strings.Contains(o, "unbalanced") {
		t.Fatalf("prepare --partitioner bytegnn: %v\n%s", err, o)
	}
	meta, err := os.ReadFile(filepath.Join(out, "meta.json"))
	if err != nil || !strings.Contains(string(meta), `"partitioner": "bytegnn"`) || !strings.Contains(string(meta), `"test_balance"`) {
		t.Fatalf("meta.json (%v) records no bytegnn partition with split balances:\n%s", err, meta)
	}
}

// TestPartitionFlagsRefused: an unknown partitioner is refused at the flag,
// naming the choices; a hop count or fanout below 1 names the flag.
func TestPartitionFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitioner", "metis-please"}, "bytegnn"},
		{[]string{"--partitioner", "bytegnn", "--block-hops", "0"}, "--block-hops 0"},
		{[]string{"--fanouts", "10,0"}, "--fanouts 10,0"},
	} {
		o, err := run(t, 0, append([]string{"partition-stats", "--data", cora, "--parts", "2"}, c.args...)...)
		if err == nil || !strings.Contains(o, c.want) {
			t.Errorf("partition-stats %v: %v, want it to say %q:\n%s", c.args, err, c.want, o)
		}
	}
}

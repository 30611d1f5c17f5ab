package budget

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"sancus/launch"
	"sancus/src/budget/memlimit"
)

func TestBytesSaturates(t *testing.T) {
	if Bytes(3, 8) != 24 || Bytes(math.MaxInt64/2, 8) != math.MaxInt64 || Bytes(-1, 8) != -1 || Bytes(5, 0) != 0 {
		t.Fatal("Bytes")
	}
}

// Under a ulimit, Check refuses past it, naming the file, the figure and
// the limit; a count no machine has is refused anywhere.
func TestCheckNamesFileFigureAndLimit(t *testing.T) {
	if !memlimit.Child(t, 2<<30) {
		return
	}
	if err := Check("g.mtx:2", "small", 1<<20); err != nil {
		t.Fatalf("a megabyte: %v", err)
	}
	err := Check("g.mtx:2", "a 10⁹-row matrix", 8e9)
	for _, want := range []string{"g.mtx:2: a 10⁹-row matrix would need 8.0 GB", "GB available (ulimit -v)", "check the count"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v, want %q", err, want)
		}
	}
	avail, _ := launch.Available()
	if err := Check("f", "x", avail+avail/200); err == nil || strings.Count(err.Error(), fmt.Sprintf("%.1f GB", float64(avail)/1e9)) > 1 {
		t.Fatalf("just over the limit, the two figures read alike: %v", err)
	}
	if err := Check("f", "x", math.MaxInt64); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("an absurd count: %v", err)
	}
	if err := Nodes("n.csv:1", 1<<40); err == nil || !strings.Contains(err.Error(), "n.csv:1: node count 1099511627776: sancus numbers nodes with int32") {
		t.Fatalf("past int32: %v", err)
	}
	if err := Nodes("", 1e9); err == nil || !strings.HasPrefix(err.Error(), "node count 1000000000's per-node arrays would need 80.0 GB") {
		t.Fatalf("10⁹ nodes: %v", err)
	}
}

func TestDiskRefusesMoreThanTheFileSystemHolds(t *testing.T) {
	dir := t.TempDir()
	if err := Disk(dir, "--edges", "a few lines", 1<<10); err != nil {
		t.Fatalf("a kilobyte refused: %v", err)
	}
	err := Disk(filepath.Join(dir, "not", "yet"), "--edges", "an exabyte", 1<<60)
	if err == nil {
		t.Fatal("an exabyte passed")
	}
	for _, want := range []string{"--edges", "an exabyte", "GB free"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

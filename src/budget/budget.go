// Package budget refuses, before anything is allocated, what a count read
// from a file would take: a node count, a nonzero count, an array's shape.
// A header costs a few bytes to write and nothing to check, while the
// arrays it sizes can take the machine down; every reader sends its
// counts through Check first.
package budget

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"syscall"

	"sancus/launch"
)

// absurd is refused even where the free memory cannot be read: no
// machine sancus runs on has a petabyte.
const absurd = 1 << 50

// Check refuses need bytes, the memory a count read at where ("file",
// "file:line", or "" where the caller adds them) implies for what (a phrase: "a node count of 1000000000's
// per-node arrays"), when this process cannot take that much: the
// machine's free memory, its cgroup's or its ulimit's, whichever is least.
func Check(where, what string, need int64) error {
	avail, from := launch.Available()
	if need >= 0 && need < absurd && (avail <= 0 || need <= avail) {
		return nil
	}
	if need < 0 || need >= absurd {
		return fmt.Errorf("%s%s would need more than %.0f TB: the count is corrupt (check the file)", prefix(where), what, float64(absurd)/1e12)
	}
	digits := 1
	for digits < 4 && gb(need, digits) == gb(avail, digits) { // "1.7 GB; this machine has 1.7 GB" says nothing
		digits++
	}
	return fmt.Errorf("%s%s would need %s GB; this machine has %s GB available (%s): check the count in the file (a corrupt header more often than a real size), or run where more memory is free",
		prefix(where), what, gb(need, digits), gb(avail, digits), from)
}

func gb(b int64, digits int) string { return strconv.FormatFloat(float64(b)/1e9, 'f', digits, 64) }

// prefix is where with its colon ("" adds nothing: a caller that wraps
// the error in its own file and line).
func prefix(where string) string {
	if where == "" {
		return ""
	}
	return where + ": "
}

// Bytes is count elements of size bytes, saturating at MaxInt64 (a count
// read from a file can be anything).
func Bytes(count, size int64) int64 {
	if count < 0 || size < 0 {
		return -1
	}
	if size != 0 && count > math.MaxInt64/size {
		return math.MaxInt64
	}
	return count * size
}

// PerNode is what a node costs while a graph is read and prepared
// (measured at 10⁷ nodes and three edges: 44 bytes resident at the peak
// of loading it, 71 at prepare's): its label, its one-hot feature (a row
// pointer, a column and a value), the adjacency's row pointer with the
// two counters that build it, and prepare's copies. A smaller figure
// passes a node count the load cannot hold, which ends in the kernel's
// OOM killer instead of a message.
const PerNode = 80

// Nodes refuses a node count read at where before any per-node array is
// made: ids are int32, and every node takes PerNode bytes at least.
func Nodes(where string, n int) error {
	if n < 0 {
		return fmt.Errorf("%snegative node count %d", prefix(where), n)
	}
	if n > math.MaxInt32 {
		return fmt.Errorf("%snode count %d: sancus numbers nodes with int32 (at most %d); check the file", prefix(where), n, math.MaxInt32)
	}
	return Check(where, fmt.Sprintf("node count %d's per-node arrays", n), Bytes(int64(n), PerNode))
}

// Disk refuses need bytes written under dir (flag names the flag or
// file whose count implies them) when its file system has less free: a
// writer that streams to disk holds little memory, so a count that its
// memory check passes can still fill the disk under every other job's
// files. A dir that does not exist yet is measured at its nearest parent.
func Disk(dir, flag, what string, need int64) error {
	free, ok := freeBytes(dir)
	if !ok || need <= free {
		return nil
	}
	return fmt.Errorf("%s: %s would write about %s GB; %s has %s GB free: lower the count, or write where there is room",
		flag, what, gb(need, 1), dir, gb(free, 1))
}

// freeBytes is what an unprivileged writer may still put on the file
// system holding path (or its nearest existing parent).
func freeBytes(path string) (int64, bool) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(p, &st); err == nil {
			return int64(st.Bavail) * int64(st.Bsize), true
		}
		if p == filepath.Dir(p) {
			return 0, false
		}
	}
}

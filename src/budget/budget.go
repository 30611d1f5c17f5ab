// Package budget refuses, before anything is allocated, what a count read
// from a file would take: a node count, a nonzero count, an array's shape.
// A header costs a few bytes to write and nothing to check, while the
// arrays it sizes can take the machine down; every reader sends its
// counts through Check first.
package budget

import (
	"fmt"
	"math"

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
	return fmt.Errorf("%s%s would need %.1f GB; this machine has %.1f GB available (%s): check the count in the file (a corrupt header more often than a real size), or run where more memory is free",
		prefix(where), what, float64(need)/1e9, float64(avail)/1e9, from)
}

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

// PerNode is the least a node costs once a graph is read: a row pointer
// (8 bytes), a label, a training mask entry and a feature row's pointer.
const PerNode = 24

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

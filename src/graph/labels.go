package graph

import (
	"fmt"
	"strings"
)

func errorfFile(path, format string, args ...any) error {
	return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
}

// ReadLabels reads one integer class per line (-1 = unlabeled). n > 0 checks
// the count against the graph.
func ReadLabels(path string, n int) ([]int32, error) {
	l, err := openLines(path)
	if err != nil {
		return nil, err
	}
	defer l.close()
	var out []int32
	for l.next() {
		t := strings.TrimSpace(l.text)
		if t == "" {
			continue
		}
		v, err := l.atoi(t, "label")
		if err != nil {
			return nil, err
		}
		if v < -1 || v > 1<<20 {
			return nil, l.errorf("label %d out of range (want -1 or a class id ≥ 0)", v)
		}
		out = append(out, int32(v))
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	if n > 0 && len(out) != n {
		return nil, l.eofErrorf("%d labels for a graph of %d nodes", len(out), n)
	}
	return out, nil
}

// ReadSplit reads one 0-based node id per line; ids must be < n and unique.
func ReadSplit(path string, n int) ([]int32, error) {
	l, err := openLines(path)
	if err != nil {
		return nil, err
	}
	defer l.close()
	seen := make(map[int32]bool)
	var out []int32
	for l.next() {
		t := strings.TrimSpace(l.text)
		if t == "" {
			continue
		}
		v, err := l.atoi(t, "node id")
		if err != nil {
			return nil, err
		}
		if v < 0 || v >= n {
			return nil, l.errorf("node id %d outside 0..%d", v, n-1)
		}
		if seen[int32(v)] {
			return nil, l.errorf("node id %d listed twice", v)
		}
		seen[int32(v)] = true
		out = append(out, int32(v))
	}
	return out, l.err()
}

// UnusedClasses lists the class ids below Classes that no node has (a
// single-label dataset's labels must be numbered 0..Classes-1, so a gap
// or one stray large id makes outputs no node trains).
func (ds *Dataset) UnusedClasses() []int {
	if ds.Multi != nil {
		return nil
	}
	seen := make([]bool, ds.Classes)
	for _, l := range ds.Labels {
		if l >= 0 {
			seen[l] = true
		}
	}
	var unused []int
	for k, ok := range seen {
		if !ok {
			unused = append(unused, k)
		}
	}
	return unused
}

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

// checkClasses holds the labels to the class count: given (Classes), no
// label at or past it, and ids may go unused; else every id below the
// largest label must be some node's, since each still gets an output no
// node trains (a gap, or one stray large id, is a mistake more often than
// not), and the error names the largest label's node.
func (ds *Dataset) checkClasses(dir string, opt LoadOptions) error {
	if n := opt.Classes; n > 0 {
		from := opt.ClassesFrom
		if from == "" {
			from = "asked for (--classes)"
		}
		if ds.Multi != nil && n != ds.Classes {
			return fmt.Errorf("%s: the label sets name %d classes, not the %d %s", dir, ds.Classes, n, from)
		}
		if ds.Classes > n {
			return fmt.Errorf("%s: %s, past the %d classes %s", dir, ds.largestLabel(), n, from)
		}
		ds.Classes = n
		return nil
	}
	if ds.Multi != nil || opt.Classes < 0 {
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
	if len(unused) == 0 {
		return nil
	}
	shown := fmt.Sprint(unused[:min(len(unused), 5)])
	if len(unused) > 5 {
		shown = shown[:len(shown)-1] + " …]"
	}
	return fmt.Errorf("%s: %s, but no node has class %s (%d of the ids 0..%d unused): number the classes densely, or give --classes %d if the unused ones are meant",
		dir, ds.largestLabel(), shown, len(unused), ds.Classes-1, ds.Classes)
}

// largestLabel names the first node with the largest label (its line in
// labels.txt is one more).
func (ds *Dataset) largestLabel() string {
	at := 0
	for i, l := range ds.Labels {
		if l > ds.Labels[at] {
			at = i
		}
	}
	return fmt.Sprintf("node %d has label %d", at, ds.Labels[at])
}

package graph

import (
	"fmt"
	"path/filepath"
	"strings"

	"sancus/kernels/matrix"
)

// Multi-label targets come as labels-multi.txt (line i: node i's class
// ids, separated by spaces or commas; an empty line is no label) or
// labels.mtx (an N × C 0/1 Matrix Market matrix), or as OGB's node-label
// CSV with one 0/1 column per class.

// readMultiLabels reads labels-multi.txt or labels.mtx, when present.
func (ds *Dataset) readMultiLabels(dir string) error {
	var err error
	switch {
	case exists(filepath.Join(dir, "labels-multi.txt")):
		ds.Multi, err = ReadMultiLabels(filepath.Join(dir, "labels-multi.txt"), ds.N)
	case exists(filepath.Join(dir, "labels.mtx")):
		ds.Multi, err = readLabelMatrix(filepath.Join(dir, "labels.mtx"), ds.N)
	}
	return err
}

// ReadMultiLabels reads one line of class ids per node.
func ReadMultiLabels(path string, n int) (*matrix.CSR, error) {
	l, err := openLines(path)
	if err != nil {
		return nil, err
	}
	defer l.close()
	a := &matrix.CSR{RowPtr: []int64{0}}
	for l.next() {
		seen := map[int]bool{}
		for _, f := range strings.FieldsFunc(l.text, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
			c, err := l.atoi(f, "class id")
			if err != nil {
				return nil, err
			}
			if c < 0 || c > 1<<20 {
				return nil, l.errorf("class id %d out of range", c)
			}
			if seen[c] {
				return nil, l.errorf("class id %d listed twice", c)
			}
			seen[c] = true
			a.ColIdx = append(a.ColIdx, int32(c))
			a.Cols = max(a.Cols, c+1)
		}
		a.RowPtr = append(a.RowPtr, int64(len(a.ColIdx)))
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	a.Rows = len(a.RowPtr) - 1
	if a.Rows != n {
		return nil, l.eofErrorf("%d label lines for a graph of %d nodes", a.Rows, n)
	}
	a.Val = make([]float32, len(a.ColIdx))
	for i := range a.Val {
		a.Val[i] = 1
	}
	return canonical(a), nil
}

// readLabelMatrix reads an N × C 0/1 matrix: a nonzero is a label.
func readLabelMatrix(path string, n int) (*matrix.CSR, error) {
	a, err := readRows(path, n, "label")
	if err != nil {
		return nil, err
	}
	for i, v := range a.Val {
		if v != 0 && v != 1 {
			return nil, fmt.Errorf("%s: entry %d is %g: labels are 0 or 1", path, i, v)
		}
		a.Val[i] = 1
	}
	return a, nil
}

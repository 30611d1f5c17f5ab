package graph

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sancus/kernels/matrix"
	"sancus/src/budget"
)

// OGB's node-property layout, as a dataset unpacks:
//
//	raw/edge.csv[.gz]           one "u,v" per line, 0-based
//	raw/num-node-list.csv[.gz]  the node count
//	raw/node-feat.csv[.gz]      one row of comma-separated features per node (optional)
//	raw/node-label.csv[.gz]     one class per node
//	split/<name>/{train,valid,test}.csv[.gz]  one node id per line
//
// Edges are symmetrized like every other format.

func ogbRaw(dir string) string { return filepath.Join(dir, "raw") }

// eachOGB streams raw/edge.csv.
func eachOGB(path string, fn func(u, v int32) error) error {
	l, err := openLines(path)
	if err != nil {
		return err
	}
	defer l.close()
	edges := 0
	for l.next() {
		t := strings.TrimSpace(l.text)
		if t == "" {
			continue
		}
		edges++
		f := strings.Split(t, ",")
		if len(f) != 2 {
			return l.errorf("edge needs two comma-separated node ids, got %q", clip(t))
		}
		u, err := l.atoi(strings.TrimSpace(f[0]), "node id")
		if err != nil {
			return err
		}
		v, err := l.atoi(strings.TrimSpace(f[1]), "node id")
		if err != nil {
			return err
		}
		if u < 0 || v < 0 || u >= 1<<31-1 || v >= 1<<31-1 {
			return l.errorf("node id out of range in %q", clip(t))
		}
		if err := fn(int32(u), int32(v)); err != nil {
			return l.errorf("%v", err)
		}
	}
	if err := l.err(); err != nil {
		return err
	}
	if edges == 0 {
		return l.eofErrorf("no edges (the file is empty): OGB's edge.csv holds one \"u,v\" line per edge")
	}
	return nil
}

// ogbNodes reads raw/num-node-list.csv: one graph, one count.
func ogbNodes(dir string) (int, error) {
	p := ogbFile(ogbRaw(dir), "num-node-list")
	if p == "" {
		return 0, fmt.Errorf("dataset %s: OGB layout without raw/num-node-list.csv[.gz]", dir)
	}
	l, err := openLines(p)
	if err != nil {
		return 0, err
	}
	defer l.close()
	n, lines := 0, 0
	for l.next() {
		t := strings.TrimSpace(l.text)
		if t == "" {
			continue
		}
		if lines++; lines > 1 {
			return 0, l.errorf("more than one graph: sancus trains on one whole graph")
		}
		if n, err = l.atoi(t, "node count"); err != nil {
			return 0, err
		}
		if n < 1 {
			return 0, l.errorf("node count %d", n)
		}
		if err := budget.Nodes(l.at(), n); err != nil {
			return 0, err
		}
	}
	if err := l.err(); err != nil {
		return 0, err
	}
	if lines == 0 {
		return 0, l.eofErrorf("no node count")
	}
	return n, nil
}

// checkOGBEdges checks every edge against the node count (the edge file
// names no count of its own).
func checkOGBEdges(n int) func(u, v int32) error {
	return func(u, v int32) error {
		if int(u) >= n || int(v) >= n {
			return fmt.Errorf("edge %d,%d names a node ≥ the %d of num-node-list", u, v, n)
		}
		return nil
	}
}

// loadOGBNodeData reads labels, features and the split of an OGB dataset.
func loadOGBNodeData(dir string, n int, opt LoadOptions) (*Dataset, error) {
	ds := &Dataset{Name: filepath.Base(dir), N: n}
	raw := ogbRaw(dir)
	var err error
	if p := ogbFile(raw, "node-label"); p != "" {
		if ds.Labels, ds.Multi, err = readOGBLabels(p, n); err != nil {
			return nil, err
		}
	}
	if p := ogbFile(raw, "node-feat"); p != "" {
		if ds.Features, err = readOGBFeatures(p, n); err != nil {
			return nil, err
		}
	}
	return ds, ds.loadOGBSplit(dir, opt.SplitName)
}

// readOGBLabels reads one class per node, or one 0/1 column per class
// (multi-label, as ogbn-proteins).
func readOGBLabels(path string, n int) ([]int32, *matrix.CSR, error) {
	if multi, err := ogbLabelColumns(path); err != nil || multi {
		if err != nil {
			return nil, nil, err
		}
		m, err := readOGBFeatures(path, n)
		if err != nil {
			return nil, nil, err
		}
		for i, v := range m.Val {
			if v != 1 {
				return nil, nil, fmt.Errorf("%s: label entry %d is %g: multi-label columns are 0 or 1", path, i, v)
			}
		}
		return nil, m, nil
	}
	l, err := openLines(path)
	if err != nil {
		return nil, nil, err
	}
	defer l.close()
	out := make([]int32, 0, n)
	for l.next() {
		t := strings.TrimSpace(l.text)
		v := -1
		if t != "" && t != "nan" && t != "NaN" { // OGB marks unlabeled nodes with NaN
			if v, err = l.atoi(t, "label"); err != nil {
				return nil, nil, err
			}
		}
		if v < -1 || v > 1<<20 {
			return nil, nil, l.errorf("label %d out of range (want -1 or a class id ≥ 0)", v)
		}
		out = append(out, int32(v))
	}
	if err := l.err(); err != nil {
		return nil, nil, err
	}
	if len(out) != n {
		return nil, nil, l.eofErrorf("%d labels for a graph of %d nodes", len(out), n)
	}
	return out, nil, nil
}

// ogbLabelColumns reports whether the label file has several columns.
func ogbLabelColumns(path string) (bool, error) {
	l, err := openLines(path)
	if err != nil {
		return false, err
	}
	defer l.close()
	if l.next() {
		return strings.Contains(l.text, ","), nil
	}
	return false, l.err()
}

func readOGBFeatures(path string, n int) (*matrix.CSR, error) {
	l, err := openLines(path)
	if err != nil {
		return nil, err
	}
	defer l.close()
	a := &matrix.CSR{Rows: n, RowPtr: make([]int64, 1, n+1)}
	for l.next() {
		f := strings.Split(strings.TrimSpace(l.text), ",")
		if a.Cols == 0 {
			a.Cols = len(f)
		}
		if len(f) != a.Cols {
			return nil, l.errorf("%d features, the first row has %d", len(f), a.Cols)
		}
		if len(a.RowPtr) > n {
			return nil, l.errorf("more feature rows than the %d nodes", n)
		}
		for c, s := range f {
			v, err := l.atof(strings.TrimSpace(s), "feature")
			if err != nil {
				return nil, err
			}
			if v != 0 {
				a.ColIdx = append(a.ColIdx, int32(c))
				a.Val = append(a.Val, float32(v))
			}
		}
		a.RowPtr = append(a.RowPtr, int64(len(a.ColIdx)))
	}
	if err := l.err(); err != nil {
		return nil, err
	}
	if len(a.RowPtr) != n+1 {
		return nil, l.eofErrorf("%d feature rows for a graph of %d nodes", len(a.RowPtr)-1, n)
	}
	return a, nil
}

// loadOGBSplit reads split/<name>/{train,valid,test}; name may be empty
// when the dataset ships exactly one split.
func (ds *Dataset) loadOGBSplit(dir, name string) error {
	root := filepath.Join(dir, "split")
	if name == "" {
		subs, _ := os.ReadDir(root)
		var names []string
		for _, s := range subs {
			if s.IsDir() {
				names = append(names, s.Name())
			}
		}
		switch len(names) {
		case 0:
			return fmt.Errorf("dataset %s: OGB layout without split/<name>/", dir)
		case 1:
			name = names[0]
		default:
			sort.Strings(names)
			return fmt.Errorf("dataset %s: splits %s: choose one with --split-name", dir, strings.Join(names, ", "))
		}
	}
	sets := []*[]int32{&ds.Train, &ds.Val, &ds.Test}
	files := []string{"train", "valid", "test"}
	for i, f := range files {
		p := ogbFile(filepath.Join(root, name), f)
		if p == "" {
			return fmt.Errorf("dataset %s: split %s has no %s.csv[.gz]", dir, name, f)
		}
		s, err := ReadSplit(p, ds.N)
		if err != nil {
			return err
		}
		*sets[i] = s
		files[i] = filepath.Base(p)
	}
	return checkSplits(filepath.Join(root, name), files, sets)
}

// WriteOGB writes a dataset in OGB's node-property layout (gzipped CSVs,
// one split named "random"): each undirected edge once, features dense.
func WriteOGB(ds *Dataset, dir string) error {
	raw := ogbRaw(dir)
	split := filepath.Join(dir, "split", "random")
	for _, d := range []string{raw, split} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	edges := 0
	files := map[string]func(w io.Writer) error{
		filepath.Join(raw, "edge.csv.gz"): func(w io.Writer) error {
			for r := range ds.N {
				for p := ds.Adj.RowPtr[r]; p < ds.Adj.RowPtr[r+1]; p++ {
					if c := int(ds.Adj.ColIdx[p]); c > r {
						edges++
						if _, err := fmt.Fprintf(w, "%d,%d\n", r, c); err != nil {
							return err
						}
					}
				}
			}
			return nil
		},
		filepath.Join(raw, "node-label.csv.gz"): func(w io.Writer) error {
			if ds.Multi != nil {
				return writeDenseRows(w, ds.Multi, "%.0f")
			}
			return writeInts(w, ds.Labels)
		},
		filepath.Join(raw, "node-feat.csv.gz"): func(w io.Writer) error { return writeDenseRows(w, ds.Features, "") },
		filepath.Join(split, "train.csv.gz"):   func(w io.Writer) error { return writeInts(w, ds.Train) },
		filepath.Join(split, "valid.csv.gz"):   func(w io.Writer) error { return writeInts(w, ds.Val) },
		filepath.Join(split, "test.csv.gz"):    func(w io.Writer) error { return writeInts(w, ds.Test) },
	}
	for _, p := range sortedKeys(files) {
		if err := writeGzip(p, files[p]); err != nil {
			return err
		}
	}
	if err := writeGzip(filepath.Join(raw, "num-node-list.csv.gz"), func(w io.Writer) error {
		_, err := fmt.Fprintln(w, ds.N)
		return err
	}); err != nil {
		return err
	}
	return writeGzip(filepath.Join(raw, "num-edge-list.csv.gz"), func(w io.Writer) error {
		_, err := fmt.Fprintln(w, edges)
		return err
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeGzip(path string, fill func(w io.Writer) error) error {
	return writeFile(path, func(w io.Writer) error {
		z := gzip.NewWriter(w)
		b := bufio.NewWriterSize(z, 1<<20)
		if err := fill(b); err != nil {
			return err
		}
		if err := b.Flush(); err != nil {
			return err
		}
		return z.Close()
	})
}

// writeDenseRows writes a CSR matrix as comma-separated dense rows.
func writeDenseRows(w io.Writer, a *matrix.CSR, format string) error {
	row := make([]string, a.Cols)
	for r := range a.Rows {
		for c := range row {
			row[c] = "0"
		}
		for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
			if format != "" {
				row[a.ColIdx[p]] = fmt.Sprintf(format, a.Val[p])
			} else {
				row[a.ColIdx[p]] = strconv.FormatFloat(float64(a.Val[p]), 'g', -1, 32)
			}
		}
		if _, err := fmt.Fprintln(w, strings.Join(row, ",")); err != nil {
			return err
		}
	}
	return nil
}

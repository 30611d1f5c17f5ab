package graph

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sancus/kernels/matrix"
)

// Two dataset layouts hold more than a graph file: a gnn-benchmark .npz
// archive (adjacency, features and labels as NumPy arrays) and OGB's
// node-property layout (raw/*.csv[.gz] plus split/<name>/). Both stream
// their edges like the text formats and load their node data apart.

// npzPath is the archive a dataset path names: the path itself, or the
// single *.npz in a directory ("" if neither).
func npzPath(path string) string {
	if strings.HasSuffix(path, ".npz") {
		return path
	}
	if m, _ := filepath.Glob(filepath.Join(path, "*.npz")); len(m) == 1 {
		return m[0]
	}
	return ""
}

// ogbFile is dir/name.csv.gz or dir/name.csv, whichever exists ("" if none).
func ogbFile(dir, name string) string {
	for _, p := range []string{filepath.Join(dir, name+".csv.gz"), filepath.Join(dir, name+".csv")} {
		if exists(p) {
			return p
		}
	}
	return ""
}

func isOGBEdges(p string) bool {
	return strings.HasSuffix(p, "edge.csv") || strings.HasSuffix(p, "edge.csv.gz")
}

// datasetName is a dataset path's base name without an archive extension.
func datasetName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".npz")
}

// eachNPZ streams a CSR adjacency stored as adj_indptr (read whole: one
// entry per node) and adj_indices (read in chunks).
func eachNPZ(path string, fn func(u, v int32) error) error {
	f, err := openNPZ(path)
	if err != nil {
		return err
	}
	defer f.close()
	n, err := npzSquare(f, "adj")
	if err != nil {
		return err
	}
	ptr, err := f.readInts("adj_indptr")
	if err != nil {
		return err
	}
	if len(ptr) != n+1 || ptr[0] != 0 {
		return fmt.Errorf("%s: adj_indptr has %d entries starting at %d, want %d starting at 0", path, len(ptr), first(ptr), n+1)
	}
	idx, err := f.array("adj_indices")
	if err != nil {
		return err
	}
	defer idx.close()
	if int64(idx.len()) != ptr[n] {
		return fmt.Errorf("%s: adj_indices has %d entries, adj_indptr ends at %d", path, idx.len(), ptr[n])
	}
	row := 0
	return idx.eachInt(func(k int, c int64) error {
		for int64(k) >= ptr[row+1] {
			row++
			if ptr[row+1] < ptr[row] {
				return fmt.Errorf("%s: adj_indptr decreases at row %d", path, row)
			}
		}
		if c < 0 || c >= int64(n) {
			return fmt.Errorf("%s: adj_indices[%d] = %d outside 0..%d", path, k, c, n-1)
		}
		return fn(int32(row), int32(c))
	})
}

func first(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[0]
}

// npzSquare reads prefix_shape and checks it is a square matrix.
func npzSquare(f *npzFile, prefix string) (int, error) {
	shape, err := f.readInts(prefix + "_shape")
	if err != nil {
		return 0, err
	}
	if len(shape) != 2 || shape[0] != shape[1] || shape[0] < 0 {
		return 0, fmt.Errorf("%s: %s_shape is %v, want a square [n n]", f.path, prefix, shape)
	}
	return int(shape[0]), nil
}

// npzCSR reads a CSR matrix stored as prefix_data/indices/indptr/shape.
func npzCSR(f *npzFile, prefix string, rows int) (*matrix.CSR, error) {
	shape, err := f.readInts(prefix + "_shape")
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 || shape[0] != int64(rows) || shape[1] < 0 {
		return nil, fmt.Errorf("%s: %s_shape is %v, want [%d features]", f.path, prefix, shape, rows)
	}
	ptr, err := f.readInts(prefix + "_indptr")
	if err != nil {
		return nil, err
	}
	idx, err := f.readInts(prefix + "_indices")
	if err != nil {
		return nil, err
	}
	val, err := f.readFloats(prefix + "_data")
	if err != nil {
		return nil, err
	}
	a := &matrix.CSR{Rows: rows, Cols: int(shape[1]), RowPtr: ptr, ColIdx: make([]int32, len(idx)), Val: val}
	for i, c := range idx {
		a.ColIdx[i] = int32(c)
	}
	if len(ptr) != rows+1 || len(val) != len(idx) {
		return nil, fmt.Errorf("%s: %s_indptr has %d entries (want %d), %s_data %d values for %d indices", f.path, prefix, len(ptr), rows+1, prefix, len(val), len(idx))
	}
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", f.path, prefix, err)
	}
	return canonical(a), nil
}

// loadNPZNodeData reads labels and features from a gnn-benchmark archive:
// CSR attr_* or a dense N×F "features" array (none: one-hot features).
func loadNPZNodeData(path string, n int) (*Dataset, error) {
	f, err := openNPZ(path)
	if err != nil {
		return nil, err
	}
	defer f.close()
	ds := &Dataset{Name: datasetName(path), N: n}
	if f.has("labels") {
		l, err := f.readInts("labels")
		if err != nil {
			return nil, err
		}
		if len(l) != n {
			return nil, fmt.Errorf("%s: labels has %d entries but the graph has %d nodes", path, len(l), n)
		}
		ds.Labels = make([]int32, n)
		for i, v := range l {
			if v < -1 || v > 1<<20 {
				return nil, fmt.Errorf("%s: labels[%d] = %d out of range", path, i, v)
			}
			ds.Labels[i] = int32(v)
		}
	}
	switch {
	case f.has("attr_indptr"):
		ds.Features, err = npzCSR(f, "attr", n)
	case f.has("features"):
		ds.Features, err = npzDense(f, "features", n)
	}
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// npzDense reads an N×F array into CSR, keeping its nonzeros.
func npzDense(f *npzFile, name string, rows int) (*matrix.CSR, error) {
	a, err := f.array(name)
	if err != nil {
		return nil, err
	}
	defer a.close()
	if len(a.shape) != 2 || a.shape[0] != rows {
		return nil, fmt.Errorf("%s: %s has shape %v, want [%d features]", f.path, name, a.shape, rows)
	}
	v, err := a.floats()
	if err != nil {
		return nil, err
	}
	return denseToCSR(v, rows, a.shape[1]), nil
}

func denseToCSR(v []float32, rows, cols int) *matrix.CSR {
	out := &matrix.CSR{Rows: rows, Cols: cols, RowPtr: make([]int64, rows+1)}
	for r := range rows {
		for c, x := range v[r*cols : (r+1)*cols] {
			if x != 0 {
				out.ColIdx = append(out.ColIdx, int32(c))
				out.Val = append(out.Val, x)
			}
		}
		out.RowPtr[r+1] = int64(len(out.ColIdx))
	}
	return out
}

// readNPYSplit reads a .npy array of node ids (a split), checking range and
// uniqueness.
func readNPYSplit(path string, n int) ([]int32, error) {
	a, err := openNPY(path)
	if err != nil {
		return nil, err
	}
	defer a.close()
	seen := make([]bool, n)
	out := make([]int32, 0, a.len())
	return out, a.eachInt(func(i int, v int64) error {
		if v < 0 || v >= int64(n) {
			return a.errorf("entry %d: node id %d outside 0..%d", i, v, n-1)
		}
		if seen[v] {
			return a.errorf("entry %d: node id %d listed twice", i, v)
		}
		seen[v] = true
		out = append(out, int32(v))
		return nil
	})
}

// readNPYLabels reads a .npy array of one class per node (-1: unlabeled).
func readNPYLabels(path string) ([]int32, error) {
	a, err := openNPY(path)
	if err != nil {
		return nil, err
	}
	defer a.close()
	if len(a.shape) != 1 {
		return nil, a.errorf("shape %v: want one class per node (a 1-D array)", a.shape)
	}
	v, err := a.ints()
	if err != nil {
		return nil, err
	}
	out := make([]int32, len(v))
	for i, x := range v {
		if x < -1 || x > 1<<20 {
			return nil, a.errorf("entry %d: label %d out of range (want -1 or a class id ≥ 0)", i, x)
		}
		out[i] = int32(x)
	}
	return out, nil
}

func statDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

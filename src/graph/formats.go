package graph

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"sancus/kernels/matrix"
	"sancus/src/budget"
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
	idx, err := f.array("adj_indices")
	if err != nil {
		return err
	}
	defer idx.close()
	if len(idx.shape) != 1 {
		return fmt.Errorf("%s: adj_indices has shape %v, want a 1-D array", path, idx.shape)
	}
	ptr, err := npzIndptr(f, "adj", n, idx.len())
	if err != nil {
		return err
	}
	row := 0
	return idx.eachInt(func(k int, c int64) error {
		for int64(k) >= ptr[row+1] {
			row++
		}
		if c < 0 || c >= int64(n) {
			return fmt.Errorf("%s: adj_indices[%d] = %d outside 0..%d", path, k, c, n-1)
		}
		return fn(int32(row), int32(c))
	})
}

// npzIndptr reads prefix_indptr for rows rows and nnz entries, checking
// what the CSR's readers rely on: it starts at 0, never decreases, and
// ends at nnz. A row pointer past nnz would put every later entry in one
// row, silently.
func npzIndptr(f *npzFile, prefix string, rows, nnz int) ([]int64, error) {
	name := prefix + "_indptr"
	ptr, err := f.readInts(name, rows+1, "one row pointer per row and one more")
	if err != nil {
		return nil, err
	}
	if ptr[0] != 0 {
		return nil, fmt.Errorf("%s: %s[0] = %d, want 0", f.path, name, ptr[0])
	}
	for r := range rows {
		if ptr[r+1] < ptr[r] {
			return nil, fmt.Errorf("%s: %s decreases at row %d (%d, then %d): row pointers never decrease", f.path, name, r, ptr[r], ptr[r+1])
		}
	}
	if ptr[rows] != int64(nnz) {
		return nil, fmt.Errorf("%s: %s ends at %d, but %s_indices has %d entries", f.path, name, ptr[rows], prefix, nnz)
	}
	return ptr, nil
}

// npzShape reads prefix_shape, a pair of counts.
func npzShape(f *npzFile, prefix string) ([]int64, error) {
	a, err := f.array(prefix + "_shape")
	if err != nil {
		return nil, err
	}
	defer a.close()
	if a.len() != 2 {
		return nil, fmt.Errorf("%s: %s_shape has shape %v, want 2 entries (rows, columns)", f.path, prefix, a.shape)
	}
	return a.ints()
}

// npzSquare reads prefix_shape and checks it is a square matrix of a node
// count this machine can hold.
func npzSquare(f *npzFile, prefix string) (int, error) {
	shape, err := npzShape(f, prefix)
	if err != nil {
		return 0, err
	}
	if shape[0] != shape[1] || shape[0] < 0 {
		return 0, fmt.Errorf("%s: %s_shape is %v, want a square [n n]", f.path, prefix, shape)
	}
	if shape[0] == 0 {
		return 0, fmt.Errorf("%s: %s_shape is %v: an empty graph", f.path, prefix, shape)
	}
	if err := budget.Nodes(f.path+": "+prefix+"_shape", int(min(shape[0], math.MaxInt64))); err != nil {
		return 0, err
	}
	return int(shape[0]), nil
}

// npzCSR reads a CSR matrix stored as prefix_data/indices/indptr/shape.
func npzCSR(f *npzFile, prefix string, rows int) (*matrix.CSR, error) {
	shape, err := npzShape(f, prefix)
	if err != nil {
		return nil, err
	}
	if shape[0] != int64(rows) || shape[1] < 0 {
		return nil, fmt.Errorf("%s: %s_shape is %v, want [%d features]", f.path, prefix, shape, rows)
	}
	if shape[1] == 0 || shape[1] > math.MaxInt32 {
		return nil, fmt.Errorf("%s: %s_shape is %v: %d feature columns (want 1 to %d)", f.path, prefix, shape, shape[1], math.MaxInt32)
	}
	idxArr, err := f.array(prefix + "_indices")
	if err != nil {
		return nil, err
	}
	nnz := idxArr.len()
	idxArr.close()
	// Read as int64 and kept as int32 column, float32 value and a row's share.
	if err := budget.Check(f.path+": "+prefix+"_indices", fmt.Sprintf("a matrix of %d nonzeros", nnz), budget.Bytes(int64(nnz), 16)); err != nil {
		return nil, err
	}
	ptr, err := npzIndptr(f, prefix, rows, nnz)
	if err != nil {
		return nil, err
	}
	idx, err := f.readInts(prefix+"_indices", nnz, "one column per nonzero")
	if err != nil {
		return nil, err
	}
	val, err := f.readFloats(prefix+"_data", nnz, "one value per nonzero")
	if err != nil {
		return nil, err
	}
	a := &matrix.CSR{Rows: rows, Cols: int(shape[1]), RowPtr: ptr, ColIdx: make([]int32, len(idx)), Val: val}
	for i, c := range idx {
		if c < 0 || c >= shape[1] {
			return nil, fmt.Errorf("%s: %s_indices[%d] = %d outside 0..%d", f.path, prefix, i, c, shape[1]-1)
		}
		a.ColIdx[i] = int32(c)
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
		l, err := f.readInts("labels", n, "one class per node")
		if err != nil {
			return nil, err
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
	if a.shape[1] == 0 || a.shape[1] > math.MaxInt32 {
		return nil, fmt.Errorf("%s: %s has shape %v: %d feature columns (want 1 to %d)", f.path, name, a.shape, a.shape[1], math.MaxInt32)
	}
	// Read whole as float32, then kept as CSR (up to 8 bytes a value more).
	if err := a.whole(12); err != nil {
		return nil, err
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
	if err := a.vector("node ids, each at most once", -n); err != nil {
		return nil, err
	}
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

// readNPYLabels reads a .npy array of one class per node (-1: unlabeled)
// for a graph of n nodes.
func readNPYLabels(path string, n int) ([]int32, error) {
	a, err := openNPY(path)
	if err != nil {
		return nil, err
	}
	defer a.close()
	if len(a.shape) == 1 && a.len() != n {
		return nil, a.errorf("%d labels but the graph has %d nodes", a.len(), n)
	}
	if err := a.vector("one class per node", n); err != nil {
		return nil, err
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

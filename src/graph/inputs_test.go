package graph

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/sbinet/npyio"

	"sancus/src/budget/memlimit"
)

// What a user can hand sancus: every input below is refused with the
// file named, before it allocates, blocks or misreads.

// childLimit caps the address space of the children that read inputs
// sized to exhaust a machine: enough for the test binary, far below what
// the inputs would take.
const childLimit = 3 << 30

// A size line of 10⁹ nodes in a file of three edges, and an edge list
// with one id of 999,999,999, are refused before any per-node array.
func TestHugeNodeCountRefused(t *testing.T) {
	if !memlimit.Child(t, childLimit) {
		return
	}
	mtx := t.TempDir()
	write(t, mtx, "graph.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n1000000000 1000000000 3\n2 1\n3 2\n4 3\n")
	// Which of the size line's figures is refused first depends on the
	// memory left: the matrix's 8 GB, or the nodes' 24.
	_, err := Load(mtx, LoadOptions{})
	wantErr(t, err, "graph.mtx", 2, " GB; this machine has ")
	if _, err := OpenEdgeStream(mtx); err == nil || !strings.Contains(err.Error(), " GB; this machine has ") {
		t.Fatalf("streamed: %v", err)
	}

	snap := t.TempDir()
	write(t, snap, "edges.txt", "0 1\n1 999999999\n")
	_, err = Load(snap, LoadOptions{})
	wantErr(t, err, "edges.txt", 0, "node count 1000000000's per-node arrays would need 80.0 GB")
	if !strings.Contains(err.Error(), "ulimit -v") {
		t.Fatalf("the limit is not named: %v", err)
	}
	if _, err := OpenEdgeStream(snap); err == nil || !strings.Contains(err.Error(), "would need 80.0 GB") {
		t.Fatalf("streamed: %v", err)
	}
}

// npzArrays encodes arrays as NumPy's savez stores them.
func npzArrays(t *testing.T, zw *zip.Writer, arrays map[string]any) {
	t.Helper()
	for k, v := range arrays {
		w, err := zw.Create(k + ".npy")
		if err != nil {
			t.Fatal(err)
		}
		if err := npyio.Write(w, v); err != nil {
			t.Fatal(err)
		}
	}
}

// zeroBomb deflates a .npy header and size zero bytes after it in a few
// kilobytes a gigabyte: one block of zeros compressed against a window of
// zeros is repeated, as a decompression bomb is built.
func zeroBomb(t *testing.T, header []byte, size int64) []byte {
	t.Helper()
	const chunk = 1 << 20
	zeros := make([]byte, chunk)
	var out bytes.Buffer
	fw, _ := flate.NewWriter(&out, flate.BestCompression)
	fw.Write(header)
	fw.Write(zeros)
	fw.Flush()
	var rep bytes.Buffer
	dw, _ := flate.NewWriterDict(&rep, flate.BestCompression, zeros[:32<<10])
	dw.Write(zeros)
	dw.Flush()
	if size%chunk != 0 {
		t.Fatal("zeroBomb: size must be whole megabytes")
	}
	for range size/chunk - 1 {
		out.Write(rep.Bytes())
	}
	out.Write([]byte{1, 0, 0, 0xff, 0xff}) // a final empty stored block
	return out.Bytes()
}

// An archive of a few megabytes whose labels inflate to 10 GiB, with a
// shape to match, is refused on its shape: the graph has 3 nodes.
func TestNPZLabelsBombRefused(t *testing.T) {
	if !memlimit.Child(t, childLimit) {
		return
	}
	const n = 10737418240
	header := []byte(fmt.Sprintf("{'descr': '|i1', 'fortran_order': False, 'shape': (%d,), }", n))
	header = append(header, bytes.Repeat([]byte(" "), 127-len(header)%128)...)
	header[len(header)-1] = '\n'
	npy := append([]byte("\x93NUMPY\x01\x00"), byte(len(header)), byte(len(header)>>8))
	npy = append(npy, header...)
	bomb := zeroBomb(t, npy, n)

	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	good := goodNPZ()
	delete(good, "labels")
	npzArrays(t, zw, good)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "labels.npy", Method: zip.Deflate,
		CompressedSize64: uint64(len(bomb)), UncompressedSize64: uint64(len(npy)) + n})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bomb)
	zw.Close()
	p := filepath.Join(t.TempDir(), "bomb.npz")
	os.WriteFile(p, b.Bytes(), 0o644)
	if b.Len() > 16<<20 {
		t.Fatalf("the archive is %d bytes", b.Len())
	}
	_, err = Load(p, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "bomb.npz: labels has 10737418240 entries, want 3") {
		t.Fatalf("got %v", err)
	}
}

// A row pointer past the end (everything else valid) would put every
// later entry in one row: refused, as is one that decreases.
func TestNPZIndptrChecked(t *testing.T) {
	dir := t.TempDir()
	// a path of 8 nodes
	ptr := []int64{0, 1, 3, 5, 7, 9, 11, 13, 14}
	idx := []int32{1, 0, 2, 1, 3, 2, 4, 3, 5, 4, 6, 5, 7, 6}
	arrays := func() map[string]any {
		return map[string]any{"adj_shape": []int64{8, 8}, "adj_indptr": append([]int64(nil), ptr...), "adj_indices": idx,
			"adj_data": make([]float32, len(idx))}
	}
	p := filepath.Join(dir, "path.npz")
	writeNPZ(t, p, arrays())
	if ds, err := Load(p, LoadOptions{}); err != nil || ds.Adj.NNZ() != 14 {
		t.Fatalf("the path itself: %v", err)
	}
	for _, c := range []struct {
		at   int
		v    int64
		want string
	}{
		{5, 1e9, "adj_indptr decreases at row 5 (1000000000, then 11)"},
		{8, 15, "adj_indptr ends at 15, but adj_indices has 14 entries"},
		{3, 2, "adj_indptr decreases at row 2 (3, then 2)"},
		{0, 1, "adj_indptr[0] = 1, want 0"},
	} {
		m := arrays()
		m["adj_indptr"].([]int64)[c.at] = c.v
		q := filepath.Join(dir, fmt.Sprintf("bad%d.npz", c.at))
		writeNPZ(t, q, m)
		_, err := Load(q, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), filepath.Base(q)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("adj_indptr[%d] = %d: got %v, want %q", c.at, c.v, err, c.want)
		}
	}
}

// An edge listed from one end only, with the counts still right, is
// refused naming it, read whole or streamed.
func TestMETISAsymmetricRefused(t *testing.T) {
	dir := t.TempDir()
	// 1–2 at both ends; 1–3 and 1–4 at their higher ends only.
	p := write(t, dir, "g.graph", "4 2\n2\n1\n1\n1\n")
	_, err := ReadMETIS(p)
	wantErr(t, err, p, 0, "not symmetric: node 3 lists 1, but node 1 does not list 3")
	_, err = Load(p, LoadOptions{})
	wantErr(t, err, p, 0, "not symmetric")
	_, err = OpenEdgeStream(p)
	wantErr(t, err, p, 0, "not symmetric")
	// Listed at the lower end only.
	p = write(t, dir, "h.graph", "3 1\n2 3\n\n\n")
	_, err = ReadMETIS(p)
	wantErr(t, err, p, 0, "node 1 lists 2, but node 2 does not list 1")
	p = write(t, dir, "i.graph", "4 2\n2 3\n1\n\n\n")
	_, err = ReadMETIS(p)
	wantErr(t, err, p, 0, "3 adjacency entries") // the counts catch this one
	p = write(t, dir, "j.graph", "4 2\n2 3\n1\n4\n\n")
	_, err = ReadMETIS(p)
	wantErr(t, err, p, 0, "node 1 lists 3, but node 3 does not list 1")
}

// An edge list with no edges is no graph, in every layout.
func TestEmptyGraphRefused(t *testing.T) {
	for _, body := range []string{"", "# only a comment\n\n# another\n"} {
		dir := t.TempDir()
		write(t, dir, "edges.txt", body)
		write(t, dir, "labels.txt", "0\n1\n")
		_, err := Load(dir, LoadOptions{})
		wantErr(t, err, "edges.txt", 0, "no edges")
		_, err = OpenEdgeStream(dir)
		wantErr(t, err, "edges.txt", 0, "no edges")
	}
	dir := t.TempDir()
	write(t, dir, "graph.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n0 0 0\n")
	_, err := Load(dir, LoadOptions{})
	wantErr(t, err, "graph.mtx", 2, "no nodes")
	p := write(t, dir, "g.graph", "0 0\n")
	_, err = Load(p, LoadOptions{})
	wantErr(t, err, "g.graph", 1, "no nodes")
}

// A feature matrix of no columns is refused naming its file, not left to
// fail in the model.
func TestZeroFeatureColumnsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "graph.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n6 6 5\n2 1\n3 2\n4 3\n5 4\n6 5\n")
	write(t, dir, "labels.txt", "0\n1\n0\n1\n0\n1\n")
	write(t, dir, "features.mtx", "%%MatrixMarket matrix coordinate real general\n6 0 0\n")
	_, err := Load(dir, LoadOptions{})
	wantErr(t, err, "features.mtx", 2, "0 feature columns")
	p := filepath.Join(dir, "attr.npz")
	m := goodNPZ()
	m["attr_shape"] = []int64{3, 0}
	m["attr_indptr"] = []int64{0, 0, 0, 0}
	m["attr_indices"] = []int32{}
	m["attr_data"] = []float32{}
	writeNPZ(t, p, m)
	_, err = Load(p, LoadOptions{})
	wantErr(t, err, "attr.npz", 0, "0 feature columns")
}

// Compressed input is named as such, and a gzip stream cut short says so.
func TestCompressedInputNamed(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n"))
	zw.Close()
	os.WriteFile(filepath.Join(dir, "graph.mtx"), gz.Bytes(), 0o644)
	_, err := Load(dir, LoadOptions{})
	wantErr(t, err, "graph.mtx", 0, "gzip-compressed")
	if strings.ContainsRune(err.Error(), 0x1f) || strings.Contains(err.Error(), `\x1f`) {
		t.Fatalf("raw bytes in the message: %q", err)
	}

	// An OGB edge list cut mid-stream.
	src := t.TempDir()
	if err := Generate(src, GenConfig{Model: "planted", Nodes: 2000, Edges: 20000, Features: 4, FeatureNNZ: 2, Classes: 2,
		PIn: 0.6, FeatureSig: 0.5, TrainFrac: 0.2, ValFrac: 0.2, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(src, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ogb := filepath.Join(dir, "ogb")
	if err := WriteOGB(ds, ogb); err != nil {
		t.Fatal(err)
	}
	edge := filepath.Join(ogb, "raw", "edge.csv.gz")
	st, _ := os.Stat(edge)
	os.Truncate(edge, st.Size()/2)
	_, err = Load(ogb, LoadOptions{})
	wantErr(t, err, "edge.csv.gz", 0, "truncated gzip")

	// A .gz name on a file that is not gzip.
	os.WriteFile(edge, []byte("0,1\n"), 0o644)
	_, err = Load(ogb, LoadOptions{})
	wantErr(t, err, "edge.csv.gz", 0, "not gzip-compressed")
}

// A FIFO where a graph file is expected is refused at once, not waited on.
func TestFIFOInputRefused(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "edges.txt"), 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir, LoadOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		wantErr(t, err, "edges.txt", 0, "a FIFO, not a regular file")
	case <-time.After(10 * time.Second):
		// let the reader go: open the FIFO's other end
		if f, err := os.OpenFile(filepath.Join(dir, "edges.txt"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("reading a FIFO as the graph blocked")
	}
}

// A graph.mtx streams (as prepare reads it) with its header checked once.
func TestMTXStreams(t *testing.T) {
	s, err := OpenEdgeStream(filepath.Join(testdata, "cora"))
	if err != nil || s.N != 2708 {
		t.Fatalf("cora streamed: %v", err)
	}
}

func TestGenRefusesWhatCannotBeWritten(t *testing.T) {
	base := GenConfig{Model: "planted", Nodes: 100, Edges: 10, Features: 8, FeatureNNZ: 2, Classes: 2, PIn: 0.8, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1}
	for _, tc := range []struct {
		name string
		set  func(*GenConfig)
		want string
	}{
		{"more edges than pairs", func(c *GenConfig) { c.Edges = 1e11 }, "4950 pairs"},
		{"ids past int32", func(c *GenConfig) { c.Nodes = 1 << 40 }, "int32"},
		{"the disk", func(c *GenConfig) { c.Nodes, c.Edges = 1<<20, 1<<38 }, "GB free"},
	} {
		c := base
		tc.set(&c)
		err := Generate(filepath.Join(t.TempDir(), "g"), c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestGenStoppedLeavesNoHalfFile(t *testing.T) {
	dir := t.TempDir()
	c := GenConfig{Model: "planted", Nodes: 1000, Edges: 200000, Features: 8, FeatureNNZ: 2, Classes: 2, PIn: 0.8, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1}
	asked := 0
	c.Stop = func() bool { asked++; return asked > 1 }
	if err := Generate(dir, c); !errors.Is(err, errStopped) {
		t.Fatalf("got %v, want the stop", err)
	}
	left, _ := os.ReadDir(dir)
	for _, f := range left {
		t.Errorf("%s left behind", f.Name())
	}
}

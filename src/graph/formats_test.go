package graph

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codeberg.org/sbinet/npyio"
	"codeberg.org/sbinet/npyio/npz"
)

// cora.npz holds the Planetoid Cora graph in another node order: the same
// counts as the Matrix Market copy must come out.
func TestNPZCoraMatchesMatrixMarket(t *testing.T) {
	mtx, err := Load(filepath.Join(testdata, "cora"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	z, err := Load(filepath.Join(testdata, "npz", "cora.npz"), LoadOptions{Split: "planetoid"})
	if err != nil {
		t.Fatal(err)
	}
	if z.Name != "cora" || z.N != mtx.N || z.Adj.NNZ() != mtx.Adj.NNZ() || z.Adj.NNZ()/2 != 5278 ||
		z.Features.NNZ() != 49216 || z.Features.Cols != mtx.Features.Cols || z.Classes != 7 {
		t.Fatalf("cora.npz: %s, %d nodes, %d edges, %d feature nonzeros of %d columns, %d classes; want cora, %d, 5278, 49216 of %d, 7",
			z.Name, z.N, z.Adj.NNZ()/2, z.Features.NNZ(), z.Features.Cols, z.Classes, mtx.N, mtx.Features.Cols)
	}
	perClass := map[int32]int{}
	for _, v := range z.Train {
		perClass[z.Labels[v]]++
	}
	if len(z.Val) != 500 || len(z.Test) != 1000 || len(perClass) != 7 {
		t.Fatalf("planetoid split: %d val, %d test, classes %v", len(z.Val), len(z.Test), perClass)
	}
	for c, n := range perClass {
		if n != 20 {
			t.Fatalf("planetoid split: class %d has %d training nodes", c, n)
		}
	}
	// The streaming path sees the same edges.
	s, err := OpenEdgeStream(filepath.Join(testdata, "npz", "cora.npz"))
	if err != nil || s.N != 2708 {
		t.Fatalf("edge stream: %v, %d nodes", err, s.N)
	}
}

// writeNPZ writes arrays to an archive as NumPy's savez does (member
// names end in .npy), for the malformed-input cases.
func writeNPZ(t *testing.T, path string, arrays map[string]any) {
	t.Helper()
	named := map[string]any{}
	for k, v := range arrays {
		named[k+".npy"] = v
	}
	if err := npz.Write(path, named); err != nil {
		t.Fatal(err)
	}
}

func goodNPZ() map[string]any {
	return map[string]any{
		"adj_shape":    []int64{3, 3},
		"adj_indptr":   []int32{0, 1, 3, 4},
		"adj_indices":  []int32{1, 0, 2, 1},
		"adj_data":     []float32{1, 1, 1, 1},
		"attr_shape":   []int64{3, 2},
		"attr_indptr":  []int64{0, 1, 2, 3},
		"attr_indices": []int32{0, 1, 0},
		"attr_data":    []float32{1, 1, 1},
		"labels":       []int8{0, 1, 0},
	}
}

func TestNPZMalformed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "g.npz")
	writeNPZ(t, p, goodNPZ())
	ds, err := Load(p, LoadOptions{})
	if err != nil || ds.N != 3 || ds.Adj.NNZ() != 4 || ds.Classes != 2 {
		t.Fatalf("a good archive: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"missing array", func(m map[string]any) { delete(m, "adj_indices") }, `array "adj_indices" missing`},
		{"wrong dtype", func(m map[string]any) { m["adj_indices"] = []float32{1, 0, 2, 1} }, "adj_indices: dtype is floating point"},
		{"index out of range", func(m map[string]any) { m["adj_indices"] = []int32{1, 0, 7, 1} }, "adj_indices[2] = 7 outside 0..2"},
		{"wrong indptr length", func(m map[string]any) { m["adj_indptr"] = []int32{0, 1, 4} }, "adj_indptr has 3 entries"},
		{"not square", func(m map[string]any) { m["adj_shape"] = []int64{3, 4} }, "adj_shape is [3 4]"},
		{"labels of another graph", func(m map[string]any) { m["labels"] = []int8{0, 1} }, "labels has 2 entries"},
		{"features of another graph", func(m map[string]any) { m["attr_shape"] = []int64{4, 2} }, "attr_shape is [4 2]"},
		{"non-finite feature", func(m map[string]any) { m["attr_data"] = []float32{1, float32(inf()), 1} }, "not a finite float32"},
	} {
		m := goodNPZ()
		c.edit(m)
		q := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".npz")
		writeNPZ(t, q, m)
		_, err := Load(q, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), filepath.Base(q)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want the archive named and %q", c.name, err, c.want)
		}
	}
	// Truncated archive.
	b, _ := os.ReadFile(p)
	q := filepath.Join(dir, "truncated.npz")
	os.WriteFile(q, b[:len(b)/2], 0o644)
	if _, err := Load(q, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "truncated.npz") {
		t.Errorf("truncated archive: %v", err)
	}
}

func inf() float64 { return math.Inf(1) }

// .npy labels and splits are read beside any format, with their errors.
func TestNPYBesideTextFormat(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "graph.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n2 1\n3 2\n4 3\n")
	writeNPY(t, filepath.Join(dir, "labels.npy"), []int64{0, 1, 0, 1})
	writeNPY(t, filepath.Join(dir, "train.npy"), []int32{0, 1})
	writeNPY(t, filepath.Join(dir, "test.npy"), []int32{2, 3})
	ds, err := Load(dir, LoadOptions{})
	if err != nil || ds.Classes != 2 || len(ds.Train) != 2 || len(ds.Test) != 2 || len(ds.Val) != 0 {
		t.Fatalf("npy labels and splits: %v %+v", err, ds)
	}
	writeNPY(t, filepath.Join(dir, "test.npy"), []int32{2, 9})
	if _, err := Load(dir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "test.npy: entry 1: node id 9 outside 0..3") {
		t.Fatalf("bad split id: %v", err)
	}
	writeNPY(t, filepath.Join(dir, "test.npy"), []float32{2, 3})
	if _, err := Load(dir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "test.npy: dtype is floating point") {
		t.Fatalf("float split: %v", err)
	}
	writeNPY(t, filepath.Join(dir, "test.npy"), []int32{2, 3})
	writeNPY(t, filepath.Join(dir, "labels.npy"), []int64{0, 1, 0})
	if _, err := Load(dir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "labels.npy: 3 labels but the graph has 4 nodes") {
		t.Fatalf("short labels: %v", err)
	}
}

func writeNPY(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := npyWrite(f, v); err != nil {
		t.Fatal(err)
	}
}

// OGB: a generated graph written in OGB's layout reads back as the same
// dataset; malformed files are named with their line.
func TestOGBRoundTripAndMalformed(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "mtx")
	if err := Generate(src, GenConfig{Model: "planted", Nodes: 500, Edges: 3000, Features: 16, FeatureNNZ: 4, Classes: 4,
		PIn: 0.6, FeatureSig: 0.5, TrainFrac: 0.2, ValFrac: 0.2, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	want, err := Load(src, LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := Load(src, LoadOptions{})
	ogb := filepath.Join(dir, "ogb")
	if err := WriteOGB(raw, ogb); err != nil {
		t.Fatal(err)
	}
	got, err := Load(ogb, LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.N != want.N || got.Adj.NNZ() != want.Adj.NNZ() || got.Features.NNZ() != want.Features.NNZ() || got.Classes != want.Classes ||
		len(got.Train) != len(want.Train) || len(got.Test) != len(want.Test) {
		t.Fatalf("OGB round trip: %d nodes %d nnz %d features, want %d %d %d", got.N, got.Adj.NNZ(), got.Features.NNZ(), want.N, want.Adj.NNZ(), want.Features.NNZ())
	}
	for i, v := range want.Features.Val {
		if got.Features.Val[i] != v || got.Features.ColIdx[i] != want.Features.ColIdx[i] {
			t.Fatalf("feature %d differs after the round trip", i)
		}
	}
	gz := func(rel, body string) string {
		p := filepath.Join(ogb, rel)
		f, _ := os.Create(p)
		w := gzip.NewWriter(f)
		w.Write([]byte(body))
		w.Close()
		f.Close()
		return p
	}
	for _, c := range []struct{ file, body, want string }{
		{"raw/edge.csv.gz", "0,1\n1;2\n", "edge.csv.gz:2: edge needs two comma-separated node ids"},
		{"raw/edge.csv.gz", "0,1\n1,600\n", "edge.csv.gz:2: edge 1,600 names a node ≥ the 500"},
		{"raw/node-label.csv.gz", "0\n1,0\n", "node-label.csv.gz:2: label \"1,0\" is not an integer"},
		{"raw/node-label.csv.gz", "0,1\n1,0,1\n", "node-label.csv.gz:2: 3 features, the first row has 2"},
		{"raw/node-feat.csv.gz", "0,1\n", "node-feat.csv.gz:1: unexpected end of file: 1 feature rows for a graph of 500 nodes"},
		{"raw/num-node-list.csv.gz", "500\n20\n", "num-node-list.csv.gz:2: more than one graph"},
		{"raw/num-node-list.csv.gz", "1000000000000\n", "num-node-list.csv.gz:1: node count 1000000000000: sancus numbers nodes with int32"},
		{"split/random/valid.csv.gz", "7\n", "is also in"},
	} {
		if err := WriteOGB(raw, ogb); err != nil {
			t.Fatal(err)
		}
		if c.want == "is also in" { // a validation node that is also a training node
			c.body = strings.TrimSpace(strings.Split(strings.TrimSpace(readGz(t, filepath.Join(ogb, "split/random/train.csv.gz"))), "\n")[0]) + "\n"
		}
		gz(c.file, c.body)
		_, err := Load(ogb, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.file, err, c.want)
		}
	}
	os.Remove(filepath.Join(ogb, "raw", "edge.csv.gz"))
	gz("raw/edge.csv.gz", "")
	os.Truncate(filepath.Join(ogb, "raw", "edge.csv.gz"), 5)
	if _, err := Load(ogb, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "edge.csv.gz") {
		t.Errorf("truncated gzip: %v", err)
	}
}

func readGz(t *testing.T, p string) string {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b := new(strings.Builder)
	buf := make([]byte, 1<<16)
	for {
		n, err := r.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

func npyWrite(f *os.File, v any) error { return npyio.Write(f, v) }

// TestNPZCorruptMemberIsRefused: a byte flipped inside a member's array
// (past its header) fails the member's CRC-32, and the load says so.
func TestNPZCorruptMemberIsRefused(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testdata, "npz", "cora.npz"))
	if err != nil {
		t.Fatal(err)
	}
	z, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range z.File {
		if f.Name != "labels.npy" {
			continue
		}
		off, err := f.DataOffset()
		if err != nil || f.Method != zip.Store {
			t.Skipf("labels.npy is not stored plainly (method %d, %v)", f.Method, err)
		}
		b[off+int64(f.UncompressedSize64)-10] ^= 0x40
	}
	p := filepath.Join(t.TempDir(), "cora.npz")
	os.WriteFile(p, b, 0o644)
	if _, err := Load(p, LoadOptions{Split: "planetoid"}); err == nil || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), "labels") {
		t.Fatalf("a corrupt labels member: %v", err)
	}
}

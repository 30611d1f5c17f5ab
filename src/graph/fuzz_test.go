package graph

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"codeberg.org/sbinet/npyio"

	"sancus/src/budget/memlimit"
)

// Fuzz targets for every reader of a file a user hands sancus: whatever
// the bytes, a reader returns data that holds its invariants or an error
// naming the file, and never panics, hangs or allocates past its budget
// (the workers run capped: see memlimit.CapFuzzWorker). make fuzz runs
// each for a minute; make test-go for a few seconds.

// fuzzCap is what a fuzzing worker may allocate beyond its size at start.
const fuzzCap = 2 << 30

// fuzzFile writes data as name in a fresh directory and returns its path.
func fuzzFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	memlimit.CapFuzzWorker(fuzzCap)
	p := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// namesFile fails t unless err is nil or names the file at p.
func namesFile(t *testing.T, err error, p string) {
	t.Helper()
	if err != nil && !strings.Contains(err.Error(), filepath.Base(p)) {
		t.Fatalf("error without the file's name: %v", err)
	}
}

// checkEdges holds an edge list to its node count, and builds it when
// small enough to build quickly.
func checkEdges(t *testing.T, e *Edges) {
	t.Helper()
	if e.N < 1 || len(e.Src) != len(e.Dst) {
		t.Fatalf("%d nodes, %d sources, %d targets", e.N, len(e.Src), len(e.Dst))
	}
	for i := range e.Src {
		if e.Src[i] < 0 || int(e.Src[i]) >= e.N || e.Dst[i] < 0 || int(e.Dst[i]) >= e.N {
			t.Fatalf("edge %d (%d,%d) outside %d nodes", i, e.Src[i], e.Dst[i], e.N)
		}
	}
	if e.N <= 1<<16 {
		a, err := BuildAdjacency(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

// sameStreamed checks that the graph at p streams (as prepare reads it)
// to what reading it whole gave: e, or an error as err.
func sameStreamed(t *testing.T, p string, e *Edges, err error) {
	t.Helper()
	m := 0
	s, serr := OpenEdgeStream(p)
	if serr == nil {
		serr = s.Each(func(u, v int32) error {
			if int(u) >= s.N || int(v) >= s.N || u < 0 || v < 0 {
				t.Fatalf("streamed edge (%d,%d) outside %d nodes", u, v, s.N)
			}
			m++
			return nil
		})
	}
	namesFile(t, serr, p)
	if (err == nil) != (serr == nil) {
		t.Fatalf("read whole: %v; streamed: %v", err, serr)
	}
	if err == nil && (s.N != e.N || m != len(e.Src)) {
		t.Fatalf("streamed %d nodes and %d edges, read whole %d and %d", s.N, m, e.N, len(e.Src))
	}
}

func head(t testing.TB, p string, n int) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b[:min(n, len(b))]
}

func FuzzMTX(f *testing.F) {
	f.Add([]byte("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n"))
	f.Add([]byte("%%MatrixMarket matrix coordinate real general\n% c\n2 3 3\n1 1 0.5\n2 3 -1e3\n1 2 7\n"))
	f.Add([]byte("%%MatrixMarket matrix coordinate integer general\n2 2 1\n2 2 4\n"))
	f.Add(head(f, filepath.Join(testdata, "cora", "graph.mtx"), 400))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzFile(t, "graph.mtx", data)
		e, err := ReadMTXGraph(p)
		namesFile(t, err, p)
		if err == nil {
			checkEdges(t, e)
		}
		sameStreamed(t, p, e, err)
		a, err := ReadFeatures(p, 3)
		namesFile(t, err, p)
		if err == nil {
			if a.Rows != 3 || a.Cols < 1 {
				t.Fatalf("features %dx%d", a.Rows, a.Cols)
			}
			if err := a.Validate(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzSNAP(f *testing.F) {
	f.Add([]byte("# c\n0 1\n1 2\n"))
	f.Add([]byte("0\t1\n\n2 0 7\n"))
	f.Add(head(f, filepath.Join(testdata, "karate", "edges.txt"), 547))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzFile(t, "edges.txt", data)
		e, err := ReadSNAP(p)
		namesFile(t, err, p)
		if err == nil {
			checkEdges(t, e)
		}
		sameStreamed(t, p, e, err)
	})
}

func FuzzMETIS(f *testing.F) {
	f.Add([]byte("4 4\n2 4\n1 3\n2 4\n1 3\n"))
	f.Add([]byte("% c\n3 2 0\n2\n1 3\n2\n"))
	f.Add([]byte("4 2\n2\n1\n1\n1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzFile(t, "g.graph", data)
		e, err := ReadMETIS(p)
		namesFile(t, err, p)
		if err == nil {
			checkEdges(t, e)
		}
		sameStreamed(t, p, e, err)
	})
}

// FuzzNodeFiles reads one input as each per-node text file: labels, a
// split, multi-label sets.
func FuzzNodeFiles(f *testing.F) {
	f.Add([]byte("0\n1\n-1\n2\n"))
	f.Add([]byte("3\n0\n5\n"))
	f.Add([]byte("0 2\n\n1,3\n2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzFile(t, "labels.txt", data)
		l, err := ReadLabels(p, 0)
		namesFile(t, err, p)
		for _, v := range l {
			if v < -1 {
				t.Fatalf("label %d", v)
			}
		}
		s, err := ReadSplit(p, 8)
		namesFile(t, err, p)
		seen := map[int32]bool{}
		for _, v := range s {
			if v < 0 || v >= 8 || seen[v] {
				t.Fatalf("split %v", s)
			}
			seen[v] = true
		}
		m, err := ReadMultiLabels(p, 4)
		namesFile(t, err, p)
		if err == nil {
			if err := m.Validate(); err != nil || m.Rows != 4 {
				t.Fatalf("%d rows: %v", m.Rows, err)
			}
		}
	})
}

// FuzzOGB reads one input as each OGB CSV: the edge list, the node
// count, features and labels (gzipped when it starts as gzip does).
func FuzzOGB(f *testing.F) {
	f.Add([]byte("0,1\n1,2\n2,3\n"))
	f.Add([]byte("4\n"))
	f.Add([]byte("0.5,1,0\n0,0,2\n1,1,1\n-1,0,nan\n"))
	f.Add([]byte("0\n1\nnan\n2\n"))
	f.Add(gzipped("0,1\n3,2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		name := "edge.csv"
		if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			name += ".gz"
		}
		dir := filepath.Dir(filepath.Dir(fuzzFile(t, filepath.Join("raw", name), data)))
		p := filepath.Join(dir, "raw", name)
		err := eachOGB(p, checkOGBEdges(4))
		namesFile(t, err, p)
		q := filepath.Join(dir, "raw", strings.Replace(name, "edge", "num-node-list", 1))
		os.Rename(p, q)
		_, err = ogbNodes(dir)
		namesFile(t, err, q)
		a, err := readOGBFeatures(q, 4)
		namesFile(t, err, q)
		if err == nil {
			if err := a.Validate(); err != nil || a.Rows != 4 {
				t.Fatalf("%d rows: %v", a.Rows, err)
			}
		}
		l, m, err := readOGBLabels(q, 4)
		namesFile(t, err, q)
		if err == nil && len(l) != 4 && (m == nil || m.Rows != 4) {
			t.Fatalf("labels %v %v", l, m)
		}
	})
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

func npyBytes(f *testing.F, v any) []byte {
	var b bytes.Buffer
	if err := npyio.Write(&b, v); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

// FuzzNPY reads one input as a standalone .npy: labels and a split.
func FuzzNPY(f *testing.F) {
	f.Add(npyBytes(f, []int64{0, 1, 0, 1}))
	f.Add(npyBytes(f, []int32{2, 3}))
	f.Add(npyBytes(f, []float32{1, 2}))
	f.Add(npyBytes(f, []uint8{1, 0, 3, 2}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := readNPYHeader(bytes.NewReader(data)); err == nil {
			n := 1
			for _, d := range h.shape {
				n *= d
			}
			if n != h.n || h.n < 0 {
				t.Fatalf("shape %v, %d elements", h.shape, h.n)
			}
		}
		p := fuzzFile(t, "labels.npy", data)
		l, err := readNPYLabels(p, 4)
		namesFile(t, err, p)
		if err == nil && len(l) != 4 {
			t.Fatalf("%d labels", len(l))
		}
		s, err := readNPYSplit(p, 4)
		namesFile(t, err, p)
		if len(s) > 4 {
			t.Fatalf("split %v", s)
		}
	})
}

// FuzzNPZ loads one input as a gnn-benchmark archive, whole.
func FuzzNPZ(f *testing.F) {
	for _, edit := range []func(map[string]any){
		func(map[string]any) {},
		func(m map[string]any) { delete(m, "attr_shape"); m["features"] = [][]float32{{1, 0}, {0, 1}, {1, 1}} },
		func(m map[string]any) { m["adj_indptr"] = []int32{0, 1, 4, 4} },
	} {
		m := goodNPZ()
		edit(m)
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for k, v := range m {
			w, _ := zw.Create(k + ".npy")
			if err := npyio.Write(w, v); err != nil {
				f.Fatal(err)
			}
		}
		zw.Close()
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := fuzzFile(t, "g.npz", data)
		s, err := OpenEdgeStream(p)
		namesFile(t, err, p)
		if err != nil || s.N > 1<<16 {
			return // Load's arrays of a graph this large are its budget's to refuse
		}
		ds, err := Load(p, LoadOptions{})
		namesFile(t, err, p)
		if err == nil {
			if err := ds.Adj.Validate(); err != nil || ds.Adj.Rows != ds.N {
				t.Fatal(err)
			}
			if err := ds.Features.Validate(); err != nil || ds.Features.Rows != ds.N || ds.Features.Cols < 1 {
				t.Fatal(err)
			}
		}
	})
}

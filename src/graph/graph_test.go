package graph

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sancus/kernels/matrix"
	"sancus/src/atomicfile/fulldisk"
	"strconv"
	"strings"
	"testing"
)

// testdata holds the small real graphs the tests read (licences beside them).
const testdata = "../../testdata"

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantErr checks that err names the file and line, and says what is wrong.
func wantErr(t *testing.T, err error, file string, line int, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one mentioning %q", file, what)
	}
	loc := filepath.Base(file)
	if line > 0 {
		loc += ":" + strconv.Itoa(line) + ":"
	}
	if !strings.Contains(err.Error(), loc) || !strings.Contains(err.Error(), what) {
		t.Fatalf("error %q should name %q and say %q", err, loc, what)
	}
}

func TestMTXMalformed(t *testing.T) {
	dir := t.TempDir()
	banner := "%%MatrixMarket matrix coordinate pattern symmetric\n"
	cases := []struct {
		name, body string
		line       int
		what       string
	}{
		{"empty", "", 0, "empty file"},
		{"banner", "%%MatrixMarket tensor coordinate pattern general\n3 3 1\n1 2\n", 1, "bad Matrix Market banner"},
		{"array", "%%MatrixMarket matrix array real general\n", 1, "only coordinate"},
		{"field", "%%MatrixMarket matrix coordinate complex general\n", 1, "unsupported field"},
		{"sizeline", banner + "3 3\n", 2, "size line needs 3"},
		{"sizenum", banner + "% comment\n3 x 2\n", 3, "not an integer"},
		{"range", banner + "3 3 2\n2 1\n4 1\n", 4, "row index 4 outside 1..3"},
		{"zero", banner + "3 3 1\n0 1\n", 3, "row index 0 outside"},
		{"fields", banner + "3 3 1\n2 1 7\n", 3, "entry needs 2 fields"},
		{"value", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n", 3, "value \"abc\" is not a number"},
		{"truncated", banner + "3 3 3\n2 1\n3 1\n", 4, "2 entries, the size line declares 3"},
		{"toomany", banner + "3 3 1\n2 1\n3 1\n", 4, "more entries than the 1"},
		{"nosize", banner + "% only comments\n", 2, "no size line"},
	}
	for _, c := range cases {
		p := write(t, dir, c.name+".mtx", c.body)
		_, err := ReadMTX(p, func(int, int, float64) error { return nil })
		wantErr(t, err, p, c.line, c.what)
	}
	p := write(t, dir, "rect.mtx", banner+"3 4 1\n2 1\n")
	_, err := ReadMTXGraph(p)
	wantErr(t, err, p, 0, "must be square")
}

func TestSNAPAndMETISMalformed(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "one.txt", "# c\n0\t1\n2\n")
	_, err := ReadSNAP(p)
	wantErr(t, err, p, 3, "two node ids")
	p = write(t, dir, "nan.txt", "0 1\n1 x\n")
	_, err = ReadSNAP(p)
	wantErr(t, err, p, 2, "not an integer")
	p = write(t, dir, "neg.txt", "0 1\n-1 2\n")
	_, err = ReadSNAP(p)
	wantErr(t, err, p, 2, "out of range")

	metis := []struct {
		name, body string
		line       int
		what       string
	}{
		{"hdr", "3\n", 1, "header needs"},
		{"nb", "3 2\n2\n1 4\n2\n", 3, "neighbour 4 outside 1..3"},
		{"short", "3 2\n2\n1 3\n", 3, "2 adjacency lines, header declares 3 nodes"},
		{"count", "3 2\n2\n1\n\n", 4, "2 adjacency entries, header declares 2 edges"},
		{"weighted", "3 2 011\n", 1, "weighted METIS"},
		{"extra", "2 1\n2\n1\n1\n", 4, "more adjacency lines"},
	}
	for _, c := range metis {
		p := write(t, dir, c.name+".graph", c.body)
		_, err := ReadMETIS(p)
		wantErr(t, err, p, c.line, c.what)
	}
}

func TestLabelsAndSplitsMalformed(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "labels.txt", "0\n1\nfoo\n")
	_, err := ReadLabels(p, 3)
	wantErr(t, err, p, 3, "not an integer")
	p = write(t, dir, "labels2.txt", "0\n1\n")
	_, err = ReadLabels(p, 3)
	wantErr(t, err, p, 2, "2 labels for a graph of 3")
	p = write(t, dir, "labels3.txt", "0\n-2\n")
	_, err = ReadLabels(p, 2)
	wantErr(t, err, p, 2, "out of range")
	p = write(t, dir, "split.txt", "0\n5\n")
	_, err = ReadSplit(p, 3)
	wantErr(t, err, p, 2, "node id 5 outside 0..2")
	p = write(t, dir, "dup.txt", "1\n1\n")
	_, err = ReadSplit(p, 3)
	wantErr(t, err, p, 2, "listed twice")
}

// A dataset whose files disagree on dimensions is refused with the file named.
func TestDatasetDimensionsDisagree(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "graph.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n")
	write(t, dir, "labels.txt", "0\n1\n0\n")
	write(t, dir, "features.mtx", "%%MatrixMarket matrix coordinate pattern general\n4 2 1\n1 1\n")
	_, err := Load(dir, LoadOptions{})
	wantErr(t, err, filepath.Join(dir, "features.mtx"), 0, "4 feature rows but the graph has 3 nodes")

	write(t, dir, "features.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 2 1\n1 1\n")
	write(t, dir, "labels.txt", "0\n1\n")
	_, err = Load(dir, LoadOptions{})
	wantErr(t, err, filepath.Join(dir, "labels.txt"), 0, "2 labels but the graph has 3 nodes")

	write(t, dir, "labels.txt", "0\n1\n-1\n")
	write(t, dir, "train.txt", "2\n")
	_, err = Load(dir, LoadOptions{})
	wantErr(t, err, filepath.Join(dir, "train.txt"), 0, "node 2 has no label")
}

func TestAdjacencyAndNormalization(t *testing.T) {
	// Path 0-1-2 with a duplicate edge, a reversed duplicate and a self loop.
	e := &Edges{N: 3, Src: []int32{0, 1, 1, 2, 1}, Dst: []int32{1, 0, 2, 2, 2}}
	a, err := BuildAdjacency(e)
	if err != nil {
		t.Fatal(err)
	}
	if a.NNZ() != 4 {
		t.Fatalf("adjacency has %d entries, want 4 (duplicates and self loops dropped)", a.NNZ())
	}
	ah := Normalize(a)
	d := ah.ToDense()
	deg := []float64{2, 3, 2} // degree of A+I
	want := [][]float64{{1 / deg[0], 1 / math.Sqrt(deg[0]*deg[1]), 0},
		{1 / math.Sqrt(deg[0]*deg[1]), 1 / deg[1], 1 / math.Sqrt(deg[1]*deg[2])},
		{0, 1 / math.Sqrt(deg[1]*deg[2]), 1 / deg[2]}}
	for i := range want {
		for j := range want[i] {
			if math.Abs(float64(d.Data[i*3+j])-want[i][j]) > 1e-6 {
				t.Fatalf("Â[%d][%d] = %g, want %g", i, j, d.Data[i*3+j], want[i][j])
			}
		}
	}
	if err := ah.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestTestdataLoads(t *testing.T) {
	cases := []struct {
		dir                  string
		nodes, edges         int
		feats, classes       int
		train, val, testSize int
	}{
		{"cora", 2708, 5278, 1433, 7, 140, 500, 1000},
		{"citeseer", 3327, 4552, 3703, 6, 120, 500, 1000},
		{"karate", 34, 78, 34, 2, 3, 3, 28},
		{"polblogs", 1490, 16715, 1490, 2, 149, 149, 1192},
	}
	for _, c := range cases {
		ds, err := Load(filepath.Join(testdata, c.dir), LoadOptions{NormalizeFeatures: true, SplitSeed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if ds.N != c.nodes || int(ds.Adj.NNZ()) != 2*c.edges || ds.Features.Cols != c.feats || ds.Classes != c.classes ||
			len(ds.Train) != c.train || len(ds.Val) != c.val || len(ds.Test) != c.testSize {
			t.Errorf("%s: n=%d nnz=%d feats=%d classes=%d split %d/%d/%d", c.dir, ds.N, ds.Adj.NNZ(), ds.Features.Cols, ds.Classes,
				len(ds.Train), len(ds.Val), len(ds.Test))
		}
	}
	p := write(t, t.TempDir(), "cycle.graph", "4 4\n2 4\n1 3\n2 4\n1 3\n")
	e, err := ReadMETIS(p)
	if err != nil {
		t.Fatal(err)
	}
	if e.N != 4 || len(e.Src) != 4 {
		t.Fatalf("4-cycle: %d nodes %d edges", e.N, len(e.Src))
	}
}

// A generated graph with nearly as many classes as nodes still uses
// every class id (Load refuses a gap), for each model.
func TestGeneratedClassesAreDense(t *testing.T) {
	for _, m := range []string{"planted", "rmat", "dcsbm"} {
		dir := t.TempDir()
		cfg := GenConfig{Model: m, Nodes: 24, Edges: 60, Features: 8, FeatureNNZ: 2, Classes: 16, PIn: 0.8, FeatureSig: 0.5,
			TrainFrac: 0.5, ValFrac: 0.2, Seed: 3, Exponent: 2.5, MaxDegree: 10, Homophily: 0.8}
		if err := Generate(dir, cfg); err != nil {
			t.Fatal(err)
		}
		ds, err := Load(dir, LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if ds.Classes != 16 {
			t.Fatalf("%s: %d classes, want 16", m, ds.Classes)
		}
	}
}

func TestGenerateIsSeededAndLoads(t *testing.T) {
	cfg := GenConfig{Model: "planted", Nodes: 500, Edges: 3000, Features: 32, FeatureNNZ: 4, Classes: 4,
		PIn: 0.8, FeatureSig: 0.5, TrainFrac: 0.2, ValFrac: 0.2, Seed: 7}
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := Generate(d, cfg); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"graph.mtx", "features.mtx", "labels.txt", "train.txt"} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if string(x) != string(y) {
			t.Fatalf("%s differs between two runs with one seed", f)
		}
	}
	ds, err := Load(a, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != 500 || ds.Features.NNZ() != 500*4 || len(ds.Train) != 100 || len(ds.Val) != 100 {
		t.Fatalf("generated dataset: n=%d feature nnz=%d train=%d val=%d", ds.N, ds.Features.NNZ(), len(ds.Train), len(ds.Val))
	}
	// Homophily: most edges stay inside a class, as planted.
	same := 0
	for r := 0; r < ds.N; r++ {
		for p := ds.Adj.RowPtr[r]; p < ds.Adj.RowPtr[r+1]; p++ {
			if ds.Labels[r] == ds.Labels[ds.Adj.ColIdx[p]] {
				same++
			}
		}
	}
	if frac := float64(same) / float64(ds.Adj.NNZ()); frac < 0.75 {
		t.Fatalf("only %.2f of edges are intra-class with p-in 0.8", frac)
	}
	cfg.Model = "rmat"
	if err := Generate(t.TempDir(), cfg); err != nil {
		t.Fatal(err)
	}
	cfg.FeatureNNZ = 40
	if err := Generate(t.TempDir(), cfg); err == nil {
		t.Fatal("feature-nnz > features accepted")
	}
}

func TestGenerateReportsFullDisk(t *testing.T) {
	// A real full disk: a 64 KiB tmpfs. The graph and features fit what
	// Generate checks up front, so the disk fills on a later file (the
	// labels and splits), as it does when another job fills it meanwhile.
	// The write error must surface naming the file, and leave no partial
	// file under the real name nor a temporary one.
	dir := fulldisk.Dir(t, "64k")
	cfg := GenConfig{Model: "planted", Nodes: 2000, Edges: 2600, Features: 8, FeatureNNZ: 2, Classes: 2, PIn: 0.5, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1, Seed: 1}
	err := Generate(dir, cfg)
	if err == nil || !strings.Contains(err.Error(), "writing "+dir) || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("want a no-space error naming the file, got %v", err)

	}
	left, _ := os.ReadDir(dir)
	for _, f := range left {
		if strings.Contains(err.Error(), f.Name()) || strings.HasSuffix(f.Name(), ".tmp") {
			t.Fatalf("a partial %s was left behind", f.Name())
		}
	}
}

// Bad node data: a NaN feature, an empty train.txt and a node in two
// splits are refused before any work, with the file (and line) named.
func TestNonFiniteValuesAndBadSplits(t *testing.T) {
	dir := t.TempDir()
	for i, v := range []string{"NaN", "nan", "Inf", "-inf", "1e39"} {
		p := write(t, dir, fmt.Sprintf("f%d.mtx", i), "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 0.5\n2 2 "+v+"\n")
		_, err := ReadFeatures(p, 2)
		wantErr(t, err, p, 4, "not a finite float32")
	}
	write(t, dir, "graph.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n")
	write(t, dir, "labels.txt", "0\n1\n0\n")
	write(t, dir, "train.txt", "")
	write(t, dir, "test.txt", "1\n2\n")
	_, err := Load(dir, LoadOptions{})
	wantErr(t, err, filepath.Join(dir, "train.txt"), 0, "no training nodes")
	write(t, dir, "train.txt", "0\n2\n")
	_, err = Load(dir, LoadOptions{})
	wantErr(t, err, filepath.Join(dir, "test.txt"), 0, "node 2 is also in train.txt")
}

// Features come back with each row's columns sorted and duplicates summed;
// a size line declaring more entries than the file can hold is an error
// naming the file, not an allocation of what it declares.
func TestReadFeaturesCanonical(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "f.mtx", "%%MatrixMarket matrix coordinate real general\n3 4 6\n2 3 1.5\n1 4 2\n2 1 -1\n1 2 3\n2 3 0.25\n3 4 7\n")
	a, err := ReadFeatures(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := &matrix.CSR{Rows: 3, Cols: 4, RowPtr: []int64{0, 2, 4, 5}, ColIdx: []int32{1, 3, 0, 2, 3}, Val: []float32{3, 2, -1, 1.75, 7}}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("got %+v, want %+v", a, want)
	}
	p = write(t, dir, "huge.mtx", "%%MatrixMarket matrix coordinate pattern general\n2 2 1000000000000\n1 1\n2 2\n")
	_, err = ReadFeatures(p, 2)
	wantErr(t, err, p, 2, "declares 1000000000000 entries, but the file holds")
	// Rows that no memory holds are refused at the size line, saying how much they would need.
	p = write(t, dir, "wide.mtx", "%%MatrixMarket matrix coordinate pattern general\n1000000000000 100000000000 2\n1 1\n2 2\n")
	_, err = ReadFeatures(p, 1000000000000)
	wantErr(t, err, p, 2, "would need 8000.0 GB")
}

// Column blocks that do not tile B's rows are refused, naming the block.
func TestSpGEMMBlocksShapes(t *testing.T) {
	x := Identity(4)
	a := &matrix.CSR{Rows: 2, Cols: 2, RowPtr: []int64{0, 1, 2}, ColIdx: []int32{0, 1}, Val: []float32{1, 2}}
	if _, err := SpGEMMBlocks([]*matrix.CSR{a, a}, []int64{0, 2, 3}, x); err == nil || !strings.Contains(err.Error(), "offsets against 4 rows") {
		t.Fatalf("offsets short of B's rows: %v", err)
	}
	b := &matrix.CSR{Rows: 2, Cols: 1, RowPtr: []int64{0, 0, 1}, ColIdx: []int32{0}, Val: []float32{3}}
	if _, err := SpGEMMBlocks([]*matrix.CSR{a, b}, []int64{0, 2, 4}, x); err == nil || !strings.Contains(err.Error(), "block 1 is 2x1, want 2x2") {
		t.Fatalf("a block narrower than its range: %v", err)
	}
	b.Cols = 2
	c, err := SpGEMMBlocks([]*matrix.CSR{a, b}, []int64{0, 2, 4}, x)
	if err != nil {
		t.Fatal(err)
	}
	want := &matrix.CSR{Rows: 2, Cols: 4, RowPtr: []int64{0, 1, 3}, ColIdx: []int32{0, 1, 2}, Val: []float32{1, 2, 3}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v, want %+v", c, want)
	}
}

// TestDCSBMShape: the degree-corrected block model's graph has the degree
// law, the largest degree and the homophily its flags ask for (a 100k-node
// graph, read back as a loader reads it: duplicates dropped).
func TestDCSBMShape(t *testing.T) {
	for _, c := range []struct {
		gamma, h float64
	}{{2.5, 0.7}, {2.1, 0.9}} {
		cfg := GenConfig{Model: "dcsbm", Nodes: 100000, Features: 16, FeatureNNZ: 2, Classes: 10, FeatureSig: 0.5,
			TrainFrac: 0.1, ValFrac: 0.1, Seed: 3, Exponent: c.gamma, MinDegree: 5, MaxDegree: 2000, Homophily: c.h}
		var lines DegreeStats
		cfg.Degrees = func(d DegreeStats) { lines = d }
		dir := t.TempDir()
		if err := Generate(dir, cfg); err != nil {
			t.Fatal(err)
		}
		ds, err := Load(dir, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deg := make([]int, ds.N)
		same, maxDeg := 0, 0
		for r := range ds.N {
			deg[r] = int(ds.Adj.RowPtr[r+1] - ds.Adj.RowPtr[r])
			maxDeg = max(maxDeg, deg[r])
			for p := ds.Adj.RowPtr[r]; p < ds.Adj.RowPtr[r+1]; p++ {
				if ds.Labels[r] == ds.Labels[ds.Adj.ColIdx[p]] {
					same++
				}
			}
		}
		// The tail: the share of nodes of degree ≥ x falls as x^−(γ−1),
		// read between x = 20 and 200 (past the Poisson spread of small
		// expected degrees, below the cap).
		atLeast := func(x int) float64 {
			n := 0
			for _, d := range deg {
				if d >= x {
					n++
				}
			}
			return float64(n)
		}
		slope := math.Log10(atLeast(20) / atLeast(200))
		h := float64(same) / float64(ds.Adj.NNZ())
		t.Logf("γ=%g h=%g: tail slope %.3f (want %.2f), max degree %d, homophily %.3f; %d edge lines, top 1%% of rows %.1f%% of nonzeros",
			c.gamma, c.h, slope, c.gamma-1, maxDeg, h, lines.Edges, 100*lines.Top1Share)
		// Hubs cannot keep every edge their weight asks for in a simple
		// graph (repeats between heavy nodes are drawn again, the rest
		// dropped on reading), which thins the tail a little: the slope
		// reads up to 0.15 steep, the largest degree of the edge lines is
		// 2000 −15%/+10%, and at least 60% of 2000 in the graph.
		if d := slope - (c.gamma - 1); d < -0.05 || d > 0.15 {
			t.Errorf("γ=%g: tail slope %.3f, want %.2f (−0.05, +0.15)", c.gamma, slope, c.gamma-1)
		}
		if lines.Max < 1700 || lines.Max > 2200 || maxDeg < 1200 {
			t.Errorf("γ=%g: max degree %d in the edge lines, %d in the graph; want 2000 −15%%/+10%%, ≥ 1200", c.gamma, lines.Max, maxDeg)
		}
		if math.Abs(h-c.h) > 0.02 {
			t.Errorf("γ=%g: %.3f of edges inside a class, want %.2f ± 0.02", c.gamma, h, c.h)
		}
	}
}

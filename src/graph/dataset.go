package graph

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sancus/kernels/matrix"
	"sancus/src/budget"
)

// Dataset is a whole graph in memory: what `sancus prepare` splits into
// shards and what a single-process run trains on.
type Dataset struct {
	Name     string
	N        int
	Adj      *matrix.CSR // symmetric pattern adjacency, no self loops
	Features *matrix.CSR // N × F
	Labels   []int32     // -1 = unlabeled
	Classes  int
	// Multi holds multi-label targets (N × Classes, an entry per label a
	// node has; nil: single-label). Every node is then labelled (Labels 0).
	Multi *matrix.CSR
	Train []int32
	Val   []int32
	Test  []int32
}

// LoadOptions tune how a dataset directory is read.
type LoadOptions struct {
	NormalizeFeatures bool   // divide every feature row by its sum
	SplitSeed         uint64 // for datasets that ship no split
	// Split is how a dataset without split files is split: "" or "random"
	// (10/10/80 of the labelled nodes), or "planetoid" (20 per class for
	// training, 500 validation, 1,000 test), seeded by SplitSeed.
	Split string
	// SplitName picks one of an OGB dataset's split/<name>/ directories.
	SplitName string
	// Classes, above 0, is the number of classes: labels may then leave
	// ids unused, and one at or past it is refused. At 0 the classes are
	// 0 up to the largest label, and an id no node has is refused; below
	// 0 the labels are not checked (a caller that reads the graph alone).
	Classes int
	// ClassesFrom names who set Classes, for an error ("": --classes).
	ClassesFrom string
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Load reads a dataset directory laid out as in testdata/cora: graph.mtx,
// edges.txt or a single *.graph file; optional features.mtx (else one-hot
// identity features); labels.txt; optional train/val/test.txt (else a seeded
// 10/10/80 split of the labelled nodes).
func Load(dir string, opt LoadOptions) (*Dataset, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	var e *Edges
	switch {
	case npzPath(dir) != "" || (st.IsDir() && ogbFile(ogbRaw(dir), "edge") != ""):
		e, err = streamEdges(dir) // the array and CSV layouts have no whole-file reader
	case !st.IsDir(): // a lone METIS or edge-list file
		e, err = readGraphFile(dir)
	case exists(filepath.Join(dir, "graph.mtx")):
		e, err = ReadMTXGraph(filepath.Join(dir, "graph.mtx"))
	case exists(filepath.Join(dir, "edges.txt")):
		e, err = ReadSNAP(filepath.Join(dir, "edges.txt"))
	default:
		m, _ := filepath.Glob(filepath.Join(dir, "*.graph"))
		if len(m) != 1 {
			return nil, fmt.Errorf("dataset %s: no graph.mtx, edges.txt, single *.graph, single *.npz or OGB raw/edge.csv", dir)
		}
		e, err = ReadMETIS(m[0])
	}
	if err != nil {
		return nil, err
	}
	nodes, err := LoadNodeData(dir, e.N, opt)
	if err != nil {
		return nil, err
	}
	e.N = nodes.N
	if nodes.Adj, err = BuildAdjacency(e); err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dir, err)
	}
	return nodes, nil
}

// streamEdges collects a dataset's edge stream.
func streamEdges(path string) (*Edges, error) {
	s, err := OpenEdgeStream(path)
	if err != nil {
		return nil, err
	}
	e := &Edges{N: s.N}
	return e, s.Each(func(u, v int32) error {
		e.add(int(u), int(v))
		return nil
	})
}

// LoadNodeData reads everything of a dataset directory but its edges —
// labels, features, splits — for a graph of graphN nodes (labels may add
// isolated trailing nodes to a SNAP edge list, which cannot name them).
// Memory is O(|V| + nnz(X)).
func LoadNodeData(path string, graphN int, opt LoadOptions) (*Dataset, error) {
	// Every reader checks its node count; this is the last word before
	// the per-node arrays below.
	if err := budget.Nodes(path, graphN); err != nil {
		return nil, err
	}
	var ds *Dataset
	var err error
	dir := path
	switch {
	case npzPath(path) != "":
		z := npzPath(path)
		dir = filepath.Dir(z)
		ds, err = loadNPZNodeData(z, graphN)
	case statDir(path) && ogbFile(ogbRaw(path), "edge") != "":
		ds, err = loadOGBNodeData(path, graphN, opt)
	default:
		if !statDir(path) { // a lone graph file: its node files sit beside it
			dir = filepath.Dir(path)
		}
		ds, err = loadTextNodeData(dir, graphN)
	}
	if err != nil {
		return nil, err
	}
	ds.Name = datasetName(path)
	// .npy labels and splits may sit beside any format.
	if ds.Labels == nil {
		if p := filepath.Join(dir, "labels.npy"); exists(p) {
			if ds.Labels, err = readNPYLabels(p, ds.N); err != nil {
				return nil, err
			}
		}
	}
	if ds.Labels == nil {
		ds.Labels = make([]int32, ds.N)
		for i := range ds.Labels {
			ds.Labels[i] = -1
		}
	}
	if ds.Multi == nil {
		if err := ds.readMultiLabels(dir); err != nil {
			return nil, err
		}
	}
	if ds.Multi != nil {
		ds.Classes = ds.Multi.Cols
		ds.Labels = make([]int32, ds.N) // every node has a (possibly empty) label set
	}
	for _, l := range ds.Labels {
		ds.Classes = max(ds.Classes, int(l)+1)
	}
	if err := ds.checkClasses(dir, opt); err != nil {
		return nil, err
	}
	if ds.Features == nil {
		ds.Features = Identity(ds.N)
	}
	if opt.NormalizeFeatures {
		RowNormalize(ds.Features)
	}
	if ds.Train == nil { // OGB brings its own split
		if err := ds.loadSplits(dir, opt); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// loadTextNodeData reads labels.txt and features.mtx (each optional).
func loadTextNodeData(dir string, graphN int) (*Dataset, error) {
	ds := &Dataset{N: graphN}
	var err error
	labelsPath := filepath.Join(dir, "labels.txt")
	if exists(labelsPath) {
		if ds.Labels, err = ReadLabels(labelsPath, 0); err != nil {
			return nil, err
		}
		if len(ds.Labels) < graphN || (len(ds.Labels) > graphN && !exists(filepath.Join(dir, "edges.txt"))) {
			return nil, fmt.Errorf("%s: %d labels but the graph has %d nodes", labelsPath, len(ds.Labels), graphN)
		}
		ds.N = len(ds.Labels)
	}
	if p := filepath.Join(dir, "features.mtx"); exists(p) {
		if ds.Features, err = ReadFeatures(p, ds.N); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

func readGraphFile(p string) (*Edges, error) {
	switch filepath.Ext(p) {
	case ".graph":
		return ReadMETIS(p)
	case ".mtx":
		return ReadMTXGraph(p)
	}
	return ReadSNAP(p)
}

func (ds *Dataset) loadSplits(dir string, opt LoadOptions) error {
	names := []string{"train", "val", "test"}
	dst := []*[]int32{&ds.Train, &ds.Val, &ds.Test}
	found := 0
	for i, name := range names {
		var s []int32
		var err error
		p := filepath.Join(dir, name+".txt")
		if np := filepath.Join(dir, name+".npy"); !exists(p) && exists(np) {
			p = np
			s, err = readNPYSplit(p, ds.N)
		} else {
			s, err = ReadSplit(p, ds.N)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, v := range s {
			if ds.Labels[v] < 0 {
				return fmt.Errorf("%s: node %d has no label", p, v)
			}
		}
		*dst[i] = s
		names[i] = filepath.Base(p)
		found++
	}
	if found > 0 {
		return checkSplits(dir, names, dst)
	}
	switch opt.Split {
	case "", "random":
		ds.Train, ds.Val, ds.Test = RandomSplit(ds.Labels, 0.1, 0.1, opt.SplitSeed)
	case "planetoid":
		ds.Train, ds.Val, ds.Test = PlanetoidSplit(ds.Labels, 20, 500, 1000, opt.SplitSeed)
	default:
		return fmt.Errorf("unknown split %q (random or planetoid)", opt.Split)
	}
	return nil
}

// PlanetoidSplit draws, seeded, perClass training nodes of every class and
// then val and test nodes from the rest of the labelled nodes (Kipf and
// Welling's Cora setting: 20 per class, 500, 1,000).
func PlanetoidSplit(labels []int32, perClass, val, test int, seed uint64) (tr, va, te []int32) {
	ids := shuffledLabelled(labels, seed, 0x91a7)
	taken := map[int32]int{}
	var rest []int32
	for _, v := range ids {
		if c := labels[v]; taken[c] < perClass {
			taken[c]++
			tr = append(tr, v)
		} else {
			rest = append(rest, v)
		}
	}
	val, test = min(val, len(rest)), min(test, len(rest)-min(val, len(rest)))
	return tr, rest[:val], rest[val : val+test]
}

// checkSplits rejects an empty training set and a node in two splits: both
// train a model that reports nothing or reports accuracy on what it saw.
func checkSplits(dir string, names []string, sets []*[]int32) error {
	if len(*sets[0]) == 0 {
		return fmt.Errorf("%s: no training nodes (the file is missing or empty)", filepath.Join(dir, names[0]))
	}
	in := map[int32]int{}
	for i, s := range sets {
		for _, v := range *s {
			if j, ok := in[v]; ok {
				return fmt.Errorf("%s: node %d is also in %s: splits must not overlap", filepath.Join(dir, names[i]), v, names[j])
			}
			in[v] = i
		}
	}
	return nil
}

// RandomSplit draws a seeded train/val/test split of the labelled nodes;
// the rest of the fractions goes to test.
func RandomSplit(labels []int32, train, val float64, seed uint64) (tr, va, te []int32) {
	ids := shuffledLabelled(labels, seed, 0x5a1e)
	nt := int(train * float64(len(ids)))
	nv := int(val * float64(len(ids)))
	return ids[:nt], ids[nt : nt+nv], ids[nt+nv:]
}

// ReadFeatures reads an N×F features.mtx into CSR (duplicates summed).
func ReadFeatures(path string, n int) (*matrix.CSR, error) { return readRows(path, n, "feature") }

// readRows reads an N×C Matrix Market file of what (feature, label) rows.
func readRows(path string, n int, what string) (*matrix.CSR, error) {
	// Entries are kept as they come (row, column, value) and placed into
	// rows after; both are sized once from the size line, since appending
	// would hold up to twice them at prepare's first peak. A size line
	// larger than the file could hold is not trusted that far.
	var rs, cs []int32
	var vs []float32
	h, err := ReadMTXSized(path, func(h MTXHeader) error {
		if h.Rows != n {
			return fmt.Errorf("%d %s rows but the graph has %d nodes", h.Rows, what, n)
		}
		if h.Symmetry != "general" {
			return fmt.Errorf("%ss must be a general matrix, got %s", what, h.Symmetry)
		}
		if h.Cols == 0 {
			return fmt.Errorf("the size line declares 0 %s columns: give at least one (or leave the file out)", what)
		}
		hint := min(h.NNZ, 1<<26)
		if st, err := os.Stat(path); err == nil && !strings.HasSuffix(path, ".gz") {
			hint = min(h.NNZ, int(st.Size()/4)) // an entry line takes at least "1 1\n"
		}
		rs, cs, vs = make([]int32, 0, hint), make([]int32, 0, hint), make([]float32, 0, hint)
		return nil
	}, func(r, c int, v float64) error {
		rs, cs, vs = append(rs, int32(r)), append(cs, int32(c)), append(vs, float32(v))
		return nil
	})
	if err != nil {
		return nil, err
	}
	a := &matrix.CSR{Rows: h.Rows, Cols: h.Cols, RowPtr: make([]int64, h.Rows+1)}
	for _, r := range rs {
		a.RowPtr[r+1]++
	}
	for i := 0; i < h.Rows; i++ {
		a.RowPtr[i+1] += a.RowPtr[i]
	}
	a.ColIdx = make([]int32, len(rs))
	a.Val = make([]float32, len(rs))
	next := append([]int64(nil), a.RowPtr[:h.Rows]...)
	for i, r := range rs {
		a.ColIdx[next[r]] = cs[i]
		a.Val[next[r]] = vs[i]
		next[r]++
	}
	return canonical(a), nil
}

// canonical sorts the columns of each row and sums duplicates (in the
// order they came), in place: a's arrays are reused.
func canonical(a *matrix.CSR) *matrix.CSR {
	w := int64(0)
	lo := a.RowPtr[0]
	for r := 0; r < a.Rows; r++ {
		hi := a.RowPtr[r+1]
		sort.Stable(byCol{a.ColIdx[lo:hi], a.Val[lo:hi]})
		start := w
		for p := lo; p < hi; p++ {
			if w > start && a.ColIdx[w-1] == a.ColIdx[p] {
				a.Val[w-1] += a.Val[p]
				continue
			}
			a.ColIdx[w], a.Val[w] = a.ColIdx[p], a.Val[p]
			w++
		}
		a.RowPtr[r+1], lo = w, hi
	}
	a.RowPtr[0] = 0
	a.ColIdx, a.Val = a.ColIdx[:w], a.Val[:w]
	return a
}

// byCol sorts a row's entries by column, values alongside.
type byCol struct {
	col []int32
	val []float32
}

func (b byCol) Len() int           { return len(b.col) }
func (b byCol) Less(i, j int) bool { return b.col[i] < b.col[j] }
func (b byCol) Swap(i, j int) {
	b.col[i], b.col[j] = b.col[j], b.col[i]
	b.val[i], b.val[j] = b.val[j], b.val[i]
}

// Identity returns the n×n identity (one-hot features for featureless graphs).
func Identity(n int) *matrix.CSR {
	a := &matrix.CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1), ColIdx: make([]int32, n), Val: make([]float32, n)}
	for i := 0; i < n; i++ {
		a.RowPtr[i+1] = int64(i + 1)
		a.ColIdx[i] = int32(i)
		a.Val[i] = 1
	}
	return a
}

// RowNormalize divides each row by its sum (rows summing to 0 are left alone).
func RowNormalize(a *matrix.CSR) {
	for r := 0; r < a.Rows; r++ {
		var s float64
		for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
			s += float64(a.Val[p])
		}
		if s == 0 {
			continue
		}
		for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
			a.Val[p] = float32(float64(a.Val[p]) / s)
		}
	}
}

// shuffledLabelled is the labelled nodes in a seeded random order (stream
// keeps the splits' draws apart).
func shuffledLabelled(labels []int32, seed, stream uint64) []int32 {
	var ids []int32
	for i, l := range labels {
		if l >= 0 {
			ids = append(ids, int32(i))
		}
	}
	r := rand.New(rand.NewPCG(seed, stream))
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

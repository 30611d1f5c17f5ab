package graph

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"sancus/src/atomicfile"
	"sancus/src/budget"
)

// GenConfig describes a synthetic dataset.
type GenConfig struct {
	Model      string  // "planted" (planted partition), "rmat" (Graph500 R-MAT) or "dcsbm" (dcsbm.go)
	Nodes      int     // number of nodes
	Edges      int64   // undirected edge lines written (duplicates are dropped on read); dcsbm: 0 is Σθ/2
	Features   int     // feature dimension
	FeatureNNZ int     // ones per feature row
	Classes    int     // number of classes
	PIn        float64 // planted: probability an edge stays inside its class
	FeatureSig float64 // probability a feature is drawn from the class's own features
	TrainFrac  float64
	ValFrac    float64
	Seed       uint64
	// dcsbm: the weights' power law (exponent γ, bounds; MinDegree 0 is the
	// bound whose mean is 2·Edges/Nodes) and the fraction of edges inside
	// a class.
	Exponent             float64
	MinDegree, MaxDegree int
	Homophily            float64
	// MultiLabel writes labels-multi.txt: every node has its planted class,
	// the next class with probability 1/2 and any other with 1/10.
	MultiLabel bool
	// Progress, if set, hears how many of the edges are written.
	Progress func(done, total int64)
	// Degrees, if set, hears the degrees of the edges written.
	Degrees func(DegreeStats)
	// Stop, if set, is asked now and then whether to give up (a signal):
	// the file being written is then removed, not left half-written.
	Stop func() bool
}

// DegreeStats describe the degrees of the edge lines written (duplicates
// counted: a reader drops them).
type DegreeStats struct {
	Edges     int64
	Max, Min  int
	Mean      float64
	Top1Share float64 // share of the nonzeros in the 1% of rows with most
}

func degreeStats(deg []int32, edges int64) DegreeStats {
	s := DegreeStats{Edges: edges, Min: math.MaxInt}
	sorted := slices.Clone(deg)
	slices.SortFunc(sorted, func(a, b int32) int { return int(b) - int(a) })
	var total, top int64
	k := max(1, len(sorted)/100)
	for i, d := range sorted {
		total += int64(d)
		if i < k {
			top += int64(d)
		}
		s.Max, s.Min = max(s.Max, int(d)), min(s.Min, int(d))
	}
	s.Mean = float64(total) / float64(len(deg))
	if total > 0 {
		s.Top1Share = float64(top) / float64(total)
	}
	return s
}

// Validate reports the first unusable field.
func (c GenConfig) Validate() error {
	switch {
	case c.Model != "planted" && c.Model != "rmat" && c.Model != "dcsbm":
		return fmt.Errorf("gen: model %q is not planted, rmat or dcsbm", c.Model)
	case c.Nodes < 2:
		return fmt.Errorf("gen: need at least 2 nodes, got %d", c.Nodes)
	case c.Edges < 0:
		return fmt.Errorf("gen: negative edge count %d", c.Edges)
	case c.Nodes > math.MaxInt32:
		return budget.Nodes("gen: --nodes", c.Nodes)
	case c.Classes < 1 || c.Classes > c.Nodes:
		return fmt.Errorf("gen: classes %d must be in 1..nodes", c.Classes)
	case c.Features < 1 || c.FeatureNNZ < 1 || c.FeatureNNZ > c.Features:
		return fmt.Errorf("gen: need 1 ≤ feature-nnz (%d) ≤ features (%d)", c.FeatureNNZ, c.Features)
	case c.PIn < 0 || c.PIn > 1 || c.FeatureSig < 0 || c.FeatureSig > 1:
		return fmt.Errorf("gen: probabilities must be in [0,1]")
	case c.TrainFrac < 0 || c.ValFrac < 0 || c.TrainFrac+c.ValFrac > 1:
		return fmt.Errorf("gen: train+val fractions must be within [0,1]")
	case c.Model == "dcsbm":
		if err := c.validateDCSBM(); err != nil {
			return err
		}
	}
	if c.Edges > pairs(c.Nodes) {
		return fmt.Errorf("gen: --edges %d is more than the %d pairs %d nodes have: lower --edges or raise --nodes", c.Edges, pairs(c.Nodes), c.Nodes)
	}
	return budget.Nodes("gen: --nodes", c.Nodes)
}

// pairs is how many undirected edges n nodes can hold without loops.
func pairs(n int) int64 { return int64(n) * int64(n-1) / 2 }

// outputBytes is about what Generate writes: an edge line and a feature
// line are two ids and two separators each.
func (c GenConfig) outputBytes() int64 {
	digits := func(n int) int64 { return int64(len(strconv.Itoa(n))) }
	edges := budget.Bytes(c.Edges, 2*digits(c.Nodes)+2)
	features := budget.Bytes(int64(c.Nodes)*int64(c.FeatureNNZ), digits(c.Nodes)+digits(c.Features)+2)
	if edges < 0 || features < 0 || edges > math.MaxInt64-features {
		return math.MaxInt64
	}
	return edges + features
}

// errStopped is a generation a signal ended: its files are not written.
var errStopped = errors.New("stopped by a signal")

// stopped is whether c.Stop says to give up, checked every 64k lines.
func (c GenConfig) stopped(i int64) bool {
	return c.Stop != nil && i&(1<<16-1) == 0 && c.Stop()
}

// Generate writes graph.mtx, features.mtx, labels.txt and train/val/test.txt
// into dir. Edges stream straight to disk: memory is O(nodes), never O(edges).
func Generate(dir string, c GenConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(c.Seed, 0x6e6e))
	labels := make([]int32, c.Nodes)
	byClass := make([][]int32, c.Classes)
	for v := range labels {
		l := int32(r.IntN(c.Classes))
		labels[v] = l
		byClass[l] = append(byClass[l], int32(v))
	}
	denseClasses(labels, byClass)
	next := c.edgeSource(r, labels, byClass)
	if err := budget.Disk(dir, "gen: --edges", fmt.Sprintf("%d edges and %d feature ones", c.Edges, int64(c.Nodes)*int64(c.FeatureNNZ)), c.outputBytes()); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "graph.mtx"), func(w io.Writer) error {
		return c.writeEdges(w, next)
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "features.mtx"), func(w io.Writer) error {
		return c.writeFeatures(w, r, labels)
	}); err != nil {
		return err
	}
	if c.MultiLabel {
		if err := writeFile(filepath.Join(dir, "labels-multi.txt"), func(w io.Writer) error {
			return c.writeLabelSets(w, r, labels)
		}); err != nil {
			return err
		}
	} else if err := writeFile(filepath.Join(dir, "labels.txt"), func(w io.Writer) error {
		return writeInts(w, labels)
	}); err != nil {
		return err
	}
	tr, va, te := RandomSplit(labels, c.TrainFrac, c.ValFrac, c.Seed)
	for name, ids := range map[string][]int32{"train.txt": tr, "val.txt": va, "test.txt": te} {
		if err := writeFile(filepath.Join(dir, name), func(w io.Writer) error { return writeInts(w, ids) }); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes through a temporary name and renames, so a full disk or a
// crash never leaves a truncated file under the real name.
func writeFile(path string, fill func(w io.Writer) error) error {
	return atomicfile.Write(path, fill)
}

func writeInts(w io.Writer, xs []int32) error {
	var buf []byte
	for _, x := range xs {
		buf = strconv.AppendInt(buf[:0], int64(x), 10)
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// edgeSource returns the model's edge draw, and sets c.Edges where the
// model derives it (dcsbm without --edges).
func (c *GenConfig) edgeSource(r *rand.Rand, labels []int32, byClass [][]int32) func() (int, int) {
	switch c.Model {
	case "rmat":
		scale := bits.Len(uint(c.Nodes - 1))
		perm := make([]int32, c.Nodes) // Graph500 relabels vertices randomly
		for i := range perm {
			perm[i] = int32(i)
		}
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		return func() (int, int) {
			for {
				u, v := rmatEdge(r, scale, c.Nodes)
				if u != v {
					return int(perm[u]), int(perm[v])
				}
			}
		}
	case "dcsbm":
		theta, edges := c.weights(r)
		c.Edges = edges
		s := newDCSBM(theta, labels, byClass, c.Homophily, edges)
		return func() (int, int) { return s.edge(r) }
	}
	return func() (int, int) {
		for {
			u, v := r.IntN(c.Nodes), 0
			if r.Float64() < c.PIn {
				peers := byClass[labels[u]]
				v = int(peers[r.IntN(len(peers))])
			} else {
				v = r.IntN(c.Nodes)
			}
			if u != v {
				return u, v
			}
		}
	}
}

func (c GenConfig) writeEdges(w io.Writer, next func() (int, int)) error {
	fmt.Fprintf(w, "%%%%MatrixMarket matrix coordinate pattern symmetric\n%% sancus gen model=%s seed=%d\n%d %d %d\n",
		c.Model, c.Seed, c.Nodes, c.Nodes, c.Edges)
	var deg []int32
	if c.Degrees != nil {
		deg = make([]int32, c.Nodes)
	}
	var buf []byte
	for i := int64(0); i < c.Edges; i++ {
		if c.stopped(i) {
			return errStopped
		}
		u, v := next()
		if deg != nil {
			deg[u]++
			deg[v]++
		}
		if u < v { // lower triangle, as the symmetric format wants
			u, v = v, u
		}
		buf = strconv.AppendInt(buf[:0], int64(u+1), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(v+1), 10)
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
		if c.Progress != nil && (i+1)%(1<<16) == 0 {
			c.Progress(i+1, c.Edges)
		}
	}
	if deg != nil {
		c.Degrees(degreeStats(deg, c.Edges))
	}
	return nil
}

// rmatEdge draws one Graph500 R-MAT edge (a=0.57, b=c=0.19), rejecting ids ≥ n.
func rmatEdge(r *rand.Rand, scale, n int) (int, int) {
	for {
		u, v := 0, 0
		for l := 0; l < scale; l++ {
			p := r.Float64()
			switch {
			case p < 0.57:
			case p < 0.76:
				v |= 1 << l
			case p < 0.95:
				u |= 1 << l
			default:
				u |= 1 << l
				v |= 1 << l
			}
		}
		if u < n && v < n {
			return u, v
		}
	}
}

func (c GenConfig) writeFeatures(w io.Writer, r *rand.Rand, labels []int32) error {
	fmt.Fprintf(w, "%%%%MatrixMarket matrix coordinate pattern general\n%d %d %d\n", c.Nodes, c.Features, int64(c.Nodes)*int64(c.FeatureNNZ))
	// Class k owns a contiguous band of features; a node draws each of its
	// ones from its own band with probability FeatureSig, else uniformly.
	band := max(1, c.Features/c.Classes)
	picked := make(map[int]bool, c.FeatureNNZ)
	var buf []byte
	for v := 0; v < c.Nodes; v++ {
		if c.stopped(int64(v)) {
			return errStopped
		}
		clear(picked)
		lo := (int(labels[v]) * band) % c.Features
		for len(picked) < c.FeatureNNZ {
			var f int
			if r.Float64() < c.FeatureSig && len(picked) < band {
				f = lo + r.IntN(min(band, c.Features-lo))
			} else {
				f = r.IntN(c.Features)
			}
			if picked[f] {
				continue
			}
			picked[f] = true
			buf = strconv.AppendInt(buf[:0], int64(v+1), 10)
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, int64(f+1), 10)
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c GenConfig) writeLabelSets(w io.Writer, r *rand.Rand, labels []int32) error {
	bw := bufio.NewWriter(w)
	for _, l := range labels {
		set := []int{int(l)}
		if next := (int(l) + 1) % c.Classes; next != int(l) && r.Float64() < 0.5 {
			set = append(set, next)
		}
		if o := r.IntN(c.Classes); r.Float64() < 0.1 && !slices.Contains(set, o) {
			set = append(set, o)
		}
		for i, v := range set {
			if i > 0 {
				bw.WriteByte(' ')
			}
			bw.WriteString(strconv.Itoa(v))
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// denseClasses gives a class no node drew (few nodes, many classes) a node
// of the largest one, so that every class id is used: Load refuses a gap.
func denseClasses(labels []int32, byClass [][]int32) {
	for k := range byClass {
		if len(byClass[k]) > 0 {
			continue
		}
		big := 0
		for j := range byClass {
			if len(byClass[j]) > len(byClass[big]) {
				big = j
			}
		}
		last := len(byClass[big]) - 1
		v := byClass[big][last]
		byClass[big] = byClass[big][:last]
		labels[v] = int32(k)
		byClass[k] = append(byClass[k], v)
	}
}

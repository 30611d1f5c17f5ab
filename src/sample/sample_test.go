package sample

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/kernels/matrix"
	"sancus/src/shard"
)

// testGraph is a small random graph: Â = D^-½(A+I)D^-½ as a global CSR
// (ascending columns), features and labels of every node.
type testGraph struct {
	n      int
	adj    *matrix.CSR
	x      *matrix.CSR
	labels []int32
}

func newTestGraph(n, edges int, seed uint64) testGraph {
	r := rand.New(rand.NewPCG(seed, 1))
	nb := make([]map[int]bool, n)
	for v := range nb {
		nb[v] = map[int]bool{v: true}
	}
	for range edges {
		u, v := r.IntN(n), r.IntN(n)
		if v%3 == 0 { // a few hubs: some degrees far above the fanouts
			v = r.IntN(4)
		}
		nb[u][v], nb[v][u] = true, true
	}
	g := testGraph{n: n, adj: &matrix.CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1)}, x: &matrix.CSR{Rows: n, Cols: 5, RowPtr: make([]int64, n+1)}}
	for v := range n {
		for u := range n {
			if nb[v][u] {
				g.adj.ColIdx = append(g.adj.ColIdx, int32(u))
				g.adj.Val = append(g.adj.Val, float32(1/math.Sqrt(float64(len(nb[v])*len(nb[u])))))
			}
		}
		g.adj.RowPtr[v+1] = int64(len(g.adj.ColIdx))
		g.x.ColIdx, g.x.Val = append(g.x.ColIdx, int32(v%5)), append(g.x.Val, float32(v)+0.25)
		g.x.RowPtr[v+1] = int64(len(g.x.ColIdx))
		g.labels = append(g.labels, int32(v%3))
	}
	return g
}

// rankGraph is rank's rows of g cut into p contiguous ranges.
func (g testGraph) rankGraph(rank, p int) Graph {
	off := make([]int64, p+1)
	for r := range off {
		off[r] = int64(r * g.n / p)
	}
	lo, hi := int(off[rank]), int(off[rank+1])
	return Graph{Rank: rank, Offsets: off, Adj: g.adj.RowSlice(lo, hi), Features: g.x.RowSlice(lo, hi), Labels: g.labels[lo:hi]}
}

// edges are a batch's sampled edges of every layer: dst → (src → weight).
type edges []map[int64]map[int64]float32

func edgesOf(b *Batch) edges {
	out := make(edges, len(b.Blocks))
	for l, blk := range b.Blocks {
		out[l] = map[int64]map[int64]float32{}
		for i, v := range blk.Dst {
			m := map[int64]float32{}
			for p := blk.Adj.RowPtr[i]; p < blk.Adj.RowPtr[i+1]; p++ {
				m[blk.Src[blk.Adj.ColIdx[p]]] = blk.Adj.Val[p]
			}
			out[l][v] = m
		}
	}
	return out
}

// sampleOn samples step's batches on p in-process ranks, rank r's seeds
// being seeds[r].
func sampleOn(t *testing.T, g testGraph, p int, o Options, step uint64, seeds [][]int64) []*Batch {
	t.Helper()
	out := make([]*Batch, p)
	err := collectives.NewWorld(p, time.Minute).Run(func(c collectives.Comm) error {
		s, err := New(c, g.rankGraph(c.Rank(), p), o)
		if err != nil {
			return err
		}
		out[c.Rank()], err = s.Sample(step, seeds[c.Rank()])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every seed's sampled neighbourhood, every layer's, the seeds' labels and
// the fetched features (dense or sparse rows) are the same whichever rank
// samples it and however many ranks there are; at P = 4 the features come
// from their owners, and a rank with no seed takes part in every exchange.
func TestSamplesDoNotDependOnP(t *testing.T) {
	g := newTestGraph(120, 300, 7)
	seeds := []int64{3, 17, 40, 41, 77, 90, 118, 0}
	o := Options{Fanouts: []int{3, 2}, Weights: shard.Sym, Seed: 5, Wire: wire.FP32}
	ref := sampleOn(t, g, 1, o, 9, [][]int64{seeds})[0]
	want := edgesOf(ref)
	for _, p := range []int{2, 4} {
		split := make([][]int64, p)
		for i, v := range seeds {
			if p == 4 && i%4 == 3 {
				continue // rank 3: no seed
			}
			split[i%(p-1)] = append(split[i%(p-1)], v)
		}
		var remote int64
		so := o
		so.Sparse = true
		sparse := sampleOn(t, g, p, so, 9, split)
		for r, b := range sampleOn(t, g, p, o, 9, split) {
			remote += b.Counts.RemoteRows
			for l, m := range edgesOf(b) {
				for v, e := range m {
					if !reflect.DeepEqual(e, want[l][v]) {
						t.Fatalf("P=%d rank %d layer %d: vertex %d sampled %v, at P=1 %v", p, r, l+1, v, e, want[l][v])
					}
				}
			}
			for i, v := range split[r] {
				if b.Labels[i] != g.labels[v] {
					t.Fatalf("P=%d rank %d: seed %d has label %d, want %d", p, r, v, b.Labels[i], g.labels[v])
				}
			}
			for i, v := range b.Blocks[0].Src {
				if got, w := b.X.Row(i)[v%5], float32(v)+0.25; got != w {
					t.Fatalf("P=%d rank %d: vertex %d's feature %g, want %g", p, r, v, got, w)
				}
			}
			if x := sparse[r].XSparse; !reflect.DeepEqual(x.ToDense(), b.X) {
				t.Fatalf("P=%d rank %d: the sparse rows are not the dense ones", p, r)
			}
		}
		if remote == 0 {
			t.Fatalf("P=%d: no feature row came from another rank", p)
		}
	}
}

// With fanout at least the largest degree every neighbour is kept with
// the operator's own weight: Â's row (self loop included), or the mean
// over the neighbours; below it, k = fanout neighbours carry Â·d/k.
func TestFullFanoutKeepsEveryNeighbour(t *testing.T) {
	g := newTestGraph(60, 150, 3)
	seeds := []int64{0, 1, 2, 10, 33, 59}
	for _, w := range []shard.Aggregation{shard.Sym, shard.Mean} {
		b := sampleOn(t, g, 2, Options{Fanouts: []int{1000}, Weights: w, Seed: 1, Wire: wire.FP32}, 0, [][]int64{seeds[:3], seeds[3:]})
		for r, bt := range b {
			for v, e := range edgesOf(bt)[0] {
				want := map[int64]float32{}
				d := g.adj.RowPtr[v+1] - g.adj.RowPtr[v] - 1
				for p := g.adj.RowPtr[v]; p < g.adj.RowPtr[v+1]; p++ {
					u := int64(g.adj.ColIdx[p])
					switch {
					case w == shard.Sym:
						want[u] = g.adj.Val[p]
					case u != v:
						want[u] = float32(1 / float64(d))
					}
				}
				if !reflect.DeepEqual(e, want) {
					t.Fatalf("%v rank %d: vertex %d kept %v, want %v", w, r, v, e, want)
				}
			}
		}
	}
	b := sampleOn(t, g, 1, Options{Fanouts: []int{2}, Weights: shard.Sym, Seed: 1, Wire: wire.FP32}, 0, [][]int64{{0, 1, 2, 3}})[0]
	for v, e := range edgesOf(b)[0] {
		d := g.adj.RowPtr[v+1] - g.adj.RowPtr[v] - 1
		if int64(len(e)) != 1+min(d, 2) {
			t.Fatalf("vertex %d of degree %d kept %d edges with fanout 2 and its self loop", v, d, len(e))
		}
		for p := g.adj.RowPtr[v]; p < g.adj.RowPtr[v+1]; p++ {
			u := int64(g.adj.ColIdx[p])
			if got, ok := e[u]; ok && u != v && d > 2 && got != float32(float64(g.adj.Val[p])*float64(d)/2) {
				t.Fatalf("vertex %d's edge to %d weighs %g, want Â·d/k = %g", v, u, got, float64(g.adj.Val[p])*float64(d)/2)
			}
		}
	}
}

// Sampling at P = 4 is a function of (seed, step): the same step samples
// the same batches twice, another step or seed others.
func TestSamplingIsDeterministic(t *testing.T) {
	g := newTestGraph(200, 900, 11)
	seeds := [][]int64{{1, 5, 9}, {60, 61}, {120}, {199, 150, 3}}
	o := Options{Fanouts: []int{4, 2}, Weights: shard.Mean, Seed: 2, Wire: wire.Format(8)}
	a, b := sampleOn(t, g, 4, o, 3, seeds), sampleOn(t, g, 4, o, 3, seeds)
	c := sampleOn(t, g, 4, o, 4, seeds)
	o.Seed = 3
	d := sampleOn(t, g, 4, o, 3, seeds)
	same := func(x, y []*Batch) bool {
		for r := range x {
			if !reflect.DeepEqual(edgesOf(x[r]), edgesOf(y[r])) || !reflect.DeepEqual(x[r].X, y[r].X) {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("the same step sampled two different batches")
	}
	if same(a, c) || same(a, d) {
		t.Fatal("another step or seed sampled the same batches: the draws ignore them")
	}
}

// Draws: every rank takes the same number of steps; a global draw's
// batches do not depend on P, cover every training vertex once an epoch,
// and split evenly; a local draw keeps each rank on its own vertices.
func TestDraws(t *testing.T) {
	all := []int64{2, 3, 5, 8, 13, 21, 34, 55, 89, 144}
	cut := func(p int) TrainSet {
		ts := TrainSet{ByRank: make([][]int64, p)}
		for i, v := range all {
			ts.ByRank[i*p/len(all)] = append(ts.ByRank[i*p/len(all)], v)
		}
		return ts
	}
	ref := cut(1).Draw(DrawGlobal, 4, 1, 2, 0)
	for _, p := range []int{2, 3} {
		ts := cut(p)
		for _, d := range []Draw{DrawLocal, DrawGlobal} {
			steps := -1
			for r := range p {
				e := ts.Draw(d, 4, 1, 2, r)
				if steps >= 0 && len(e.Mine) != steps {
					t.Fatalf("%v P=%d: rank %d takes %d steps, another %d", d, p, r, len(e.Mine), steps)
				}
				steps = len(e.Mine)
				for s, m := range e.Mine {
					if d == DrawGlobal {
						if lo, hi := e.Total[s]*r/p, e.Total[s]*(r+1)/p; !reflect.DeepEqual(m, ref.Mine[s][lo:hi]) && len(m)+len(ref.Mine[s][lo:hi]) > 0 {
							t.Fatalf("P=%d rank %d step %d: seeds %v, the P=1 batch's slice %v", p, r, s, m, ref.Mine[s][lo:hi])
						}
						continue
					}
					for _, v := range m {
						if !contains(ts.ByRank[r], v) {
							t.Fatalf("local draw P=%d: rank %d drew %d, another rank's", p, r, v)
						}
					}
				}
			}
		}
	}
	seen := map[int64]int{}
	for _, m := range ref.Mine {
		for _, v := range m {
			seen[v]++
		}
	}
	if len(seen) != len(all) || len(ref.Mine) != 3 {
		t.Fatalf("a global epoch of %d steps drew %v", len(ref.Mine), seen)
	}
	if d, err := ParseDraw("everywhere"); err == nil {
		t.Fatalf("ParseDraw accepted %v", d)
	}
}

func contains(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func ExampleParseDraw() {
	d, _ := ParseDraw("global")
	fmt.Println(d, d.IndependentOfP())
	// Output: global true
}

// Neighbours keeps the k neighbours of smallest (draw, original id), as
// sorting them all by it would, on rows with few and many neighbours.
func TestNeighboursKeepTheSmallestDraws(t *testing.T) {
	g := newTestGraph(60, 900, 11)
	err := collectives.NewWorld(1, time.Minute).Run(func(c collectives.Comm) error {
		for _, k := range []int{1, 2, 5, 40} {
			s, err := New(c, g.rankGraph(0, 1), Options{Fanouts: []int{k}, Weights: shard.Mean, Seed: 4, Wire: wire.FP32})
			if err != nil {
				return err
			}
			a := s.g.Adj
			for v := range int64(a.Rows) {
				var all []candidate
				key := vertexKey(4, 7, 0, v)
				for p := a.RowPtr[v]; p < a.RowPtr[v+1]; p++ {
					if u := int64(a.ColIdx[p]); u != v {
						all = append(all, candidate{id: u, draw: mix(key ^ uint64(u))})
					}
				}
				slices.SortFunc(all, func(x, y candidate) int { return cmp.Or(cmp.Compare(x.draw, y.draw), cmp.Compare(x.id, y.id)) })
				var want []int64
				for _, c := range all[:min(k, len(all))] {
					want = append(want, c.id)
				}
				slices.Sort(want)
				if got, _, _ := s.Neighbours(7, 0, v); !slices.Equal(got, want) {
					t.Errorf("fanout %d, row %d of %d neighbours: kept %v, want %v", k, v, len(all), got, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package partition

import (
	"math"
	"slices"
	"testing"

	"sancus/kernels/matrix"
	"sancus/src/graph"
)

// dcsbmGraph generates a small block-model graph (power-law degrees,
// communities whose node ids are random, so contiguous ranges ignore
// them) and loads it whole.
func dcsbmGraph(t *testing.T, nodes int) (string, *graph.Dataset) {
	t.Helper()
	dir := t.TempDir()
	if err := graph.Generate(dir, graph.GenConfig{Model: "dcsbm", Nodes: nodes, Features: 8, FeatureNNZ: 2, Classes: 8,
		FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1, Seed: 4, Exponent: 2.3, MinDegree: 3, MaxDegree: 200, Homophily: 0.8}); err != nil {
		t.Fatal(err)
	}
	ds, err := graph.Load(dir, graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, ds
}

// TestByteGNNBalancesSplitsAndKeepsSamplesLocal: at P = 4, ByteGNN's
// partition holds each split's count within 5% of the mean, its vertices
// within β, and a 2-hop sampler (fanouts 10, 5) finds more of its sampled
// neighbours local than on contiguous ranges; the same seed gives the
// same partition; refinement keeps the bounds.
func TestByteGNNBalancesSplitsAndKeepsSamplesLocal(t *testing.T) {
	dir, ds := dcsbmGraph(t, 4000)
	s := stream(t, dir)
	sp := Splits{Train: ds.Train, Val: ds.Val, Test: ds.Test}
	opt := DefaultOptions()
	opt.Splits = sp
	const p = 4
	parts, err := Partition(KindByteGNN, s, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(parts, p, opt.Balance); err != nil {
		t.Fatal(err)
	}
	m := Measure(ds.Adj, parts, nil, p, sp)
	t.Logf("bytegnn: train %v val %v test %v rows %v, edge cut %.3f", m.Trains, m.Vals, m.Tests, m.Rows, m.EdgeCut)
	for name, b := range map[string]float64{"train": m.TrainBalance, "val": m.ValBalance, "test": m.TestBalance} {
		if b > 1.05 {
			t.Errorf("%s max/mean %.3f, want ≤ 1.05", name, b)
		}
	}
	fanouts := []int{10, 5}
	ranges := make([]int64, p+1)
	for q := range ranges {
		ranges[q] = int64(q * ds.N / p)
	}
	local := SampledLocality(ds.Adj, parts, nil, ds.Train, fanouts)
	contig := SampledLocality(ds.Adj, nil, ranges, ds.Train, fanouts)
	t.Logf("sampled neighbours local: bytegnn %.3f, contiguous %.3f", local, contig)
	if !(local > contig+0.05) {
		t.Errorf("sampled neighbours local: bytegnn %.3f, contiguous %.3f: want bytegnn clearly above", local, contig)
	}
	again, err := Partition(KindByteGNN, s, p, opt)
	if err != nil || !slices.Equal(again, parts) {
		t.Fatalf("same seed, a different partition (err %v)", err)
	}
	// Refinement keeps the bounds and cuts fewer edges (each move does).
	opt.Refine = 4
	refined, err := Partition(KindByteGNN, s, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(refined, p, opt.Balance); err != nil {
		t.Fatal(err)
	}
	r := Measure(ds.Adj, refined, nil, p, sp)
	t.Logf("refined: train %v val %v test %v, edge cut %.3f, sampled local %.3f", r.Trains, r.Vals, r.Tests, r.EdgeCut,
		SampledLocality(ds.Adj, refined, nil, ds.Train, fanouts))
	if max(r.TrainBalance, r.ValBalance, r.TestBalance) > 1.05 || !(r.EdgeCut < m.EdgeCut) {
		t.Errorf("refined: split balance %.3f %.3f %.3f, edge cut %.3f against %.3f unrefined", r.TrainBalance, r.ValBalance, r.TestBalance, r.EdgeCut, m.EdgeCut)
	}
}

// TestByteGNNKeepsBlocksWhole: where few vertices are in a split, every
// vertex within K hops of one lies in the part of one of its nearest
// split vertices (its block's centre), for K = 1 and 2, when β leaves
// the vertices unbounded; at β = 1.05 a few blocks split to keep the bounds (under 5% of
// the vertices stray). The split counts balance within 5% at P = 3.
func TestByteGNNKeepsBlocksWhole(t *testing.T) {
	dir, ds := dcsbmGraph(t, 3000)
	s := stream(t, dir)
	// Every 10th vertex in a split: train, val, test in turn.
	var sp Splits
	for v := 0; v < ds.N; v += 10 {
		switch (v / 10) % 3 {
		case 0:
			sp.Train = append(sp.Train, int32(v))
		case 1:
			sp.Val = append(sp.Val, int32(v))
		default:
			sp.Test = append(sp.Test, int32(v))
		}
	}
	for _, c := range []struct {
		hops   int
		beta   float64
		strays float64 // the share of vertices allowed off their block's part
	}{{1, 3, 0}, {2, 3, 0}, {1, 1.05, 0.05}, {2, 1.05, 0.05}} {
		hops := c.hops
		opt := DefaultOptions()
		opt.Splits, opt.Hops, opt.Balance = sp, hops, c.beta
		parts, err := Partition(KindByteGNN, s, 3, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(parts, 3, opt.Balance); err != nil {
			t.Fatal(err)
		}
		m := Measure(ds.Adj, parts, nil, 3, sp)
		if max(m.TrainBalance, m.ValBalance, m.TestBalance) > 1.05 {
			t.Errorf("K=%d β=%g: split counts train %v val %v test %v, want each within 5%%", hops, c.beta, m.Trains, m.Vals, m.Tests)
		}
		dist := hopsFromSplit(ds.Adj, sp, hops)
		centre := make([]bool, ds.N)
		for _, set := range [][]int32{sp.Train, sp.Val, sp.Test} {
			for _, v := range set {
				centre[v] = true
			}
		}
		stray := 0
		for v := range ds.N {
			if centre[v] || dist[v] < 0 {
				continue
			}
			if !nearSplitInPart(ds.Adj, v, parts, centre, dist[v]) {
				stray++
			}
		}
		t.Logf("K=%d β=%g: %d vertices off their block's part", hops, c.beta, stray)
		if float64(stray) > c.strays*float64(ds.N) {
			t.Errorf("K=%d β=%g: %d vertices lie in no part of a nearest split vertex", hops, c.beta, stray)
		}
	}
}

// hopsFromSplit is each vertex's distance to the nearest split vertex, -1
// past k hops.
func hopsFromSplit(adj *matrix.CSR, sp Splits, k int) []int {
	dist := make([]int, adj.Rows)
	for v := range dist {
		dist[v] = -1
	}
	var frontier []int32
	for _, set := range [][]int32{sp.Train, sp.Val, sp.Test} {
		for _, v := range set {
			dist[v] = 0
			frontier = append(frontier, v)
		}
	}
	for h := 1; h <= k; h++ {
		var next []int32
		for _, v := range frontier {
			for _, u := range adj.ColIdx[adj.RowPtr[v]:adj.RowPtr[v+1]] {
				if dist[u] < 0 {
					dist[u] = h
					next = append(next, u)
				}
			}
		}
		frontier = next
	}
	return dist
}

// nearSplitInPart: some split vertex d hops from v is in v's part.
func nearSplitInPart(adj *matrix.CSR, v int, parts []int32, centre []bool, d int) bool {
	seen := map[int32]bool{int32(v): true}
	frontier := []int32{int32(v)}
	for range d {
		var next []int32
		for _, x := range frontier {
			for _, u := range adj.ColIdx[adj.RowPtr[x]:adj.RowPtr[x+1]] {
				if !seen[u] {
					seen[u] = true
					next = append(next, u)
				}
			}
		}
		frontier = next
	}
	for _, u := range frontier {
		if centre[u] && parts[u] == parts[v] {
			return true
		}
	}
	return false
}

// TestSampledLocalityByHand: the expected share on a path 0-1-2-3 cut
// {0,1} {2,3}, seed 1, fanouts 1, 1. Hop 1: 1 samples 0 or 2 (½ each),
// ½ local. Hop 2: from 0 (weight ½) it samples 1, local; from 2 (½) it
// samples 1 or 3 (¼ each), 3 local. Local ½ + ½ + ¼ = 1.25 of 2 edges.
// Fanout 2 takes every neighbour: hop 1 draws both of 1's (one local),
// hop 2 every neighbour of 0 and 2 (3 edges, 2 local).
func TestSampledLocalityByHand(t *testing.T) {
	adj, err := graph.BuildAdjacency(&graph.Edges{N: 4, Src: []int32{0, 1, 2}, Dst: []int32{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	parts := []int32{0, 0, 1, 1}
	if got := SampledLocality(adj, parts, nil, []int32{1}, []int{1, 1}); math.Abs(got-1.25/2) > 1e-12 {
		t.Errorf("fanouts 1,1: %v, want %v", got, 1.25/2)
	}
	if got := SampledLocality(adj, parts, nil, []int32{1}, []int{2, 2}); math.Abs(got-3.0/5) > 1e-12 {
		t.Errorf("fanouts 2,2: %v, want %v", got, 3.0/5)
	}
	if got := SampledLocality(adj, nil, []int64{0, 2, 4}, []int32{1}, []int{2, 2}); math.Abs(got-3.0/5) > 1e-12 {
		t.Errorf("contiguous offsets: %v, want %v", got, 3.0/5)
	}
}

// TestMicrographLocalityByHand: the path of TestSampledLocalityByHand,
// root 1 in part 0. Fanouts 1,1: the root, then 0 (½, local) or 2 (½);
// then from 0: 1 (local, ½); from 2: 1 (local, ¼) or 3 (¼). Local
// 1 + ½ + ½ + ¼ of 3 vertices. Fanouts 2,2: the root, 0 and 2, then
// 1 (from 0), 1 and 3 (from 2): local 1 + 1 + 1 + 1 of 6.
func TestMicrographLocalityByHand(t *testing.T) {
	adj, err := graph.BuildAdjacency(&graph.Edges{N: 4, Src: []int32{0, 1, 2}, Dst: []int32{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	parts := []int32{0, 0, 1, 1}
	if got := MicrographLocality(adj, parts, nil, []int32{1}, []int{1, 1}); math.Abs(got-2.25/3) > 1e-12 {
		t.Errorf("fanouts 1,1: %v, want %v", got, 2.25/3)
	}
	if got := MicrographLocality(adj, parts, nil, []int32{1}, []int{2, 2}); math.Abs(got-4.0/6) > 1e-12 {
		t.Errorf("fanouts 2,2: %v, want %v", got, 4.0/6)
	}
	if got := MicrographLocality(adj, parts, nil, []int32{1, 2}, []int{2, 2}); math.Abs(got-8.0/12) > 1e-12 {
		t.Errorf("two roots, mirror images: %v, want %v", got, 8.0/12)
	}
}

// TestByteGNNNeedsASplit: without split vertices it says what it needs.
func TestByteGNNNeedsASplit(t *testing.T) {
	if _, err := Run("bytegnn", stream(t, testdata+"/karate"), 2, DefaultOptions()); err == nil {
		t.Fatal("bytegnn without a split: no error")
	}
}

package prepare

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"sancus/src/graph"
	"sancus/src/shard"
)

func coraPrepared(t *testing.T, parts int) *Prepared {
	t.Helper()
	ds, err := graph.Load("../../testdata/cora", graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := InMemory(ds, parts, Options{Precompute: shard.Aggregations})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBlocksReassembleÂ(t *testing.T) {
	p := coraPrepared(t, 3)
	var nnz int64
	for r := 0; r < 3; r++ {
		s, err := p.Shard(r)
		if err != nil {
			t.Fatal(err)
		}
		for j, b := range s.Blocks {
			if err := b.Validate(); err != nil {
				t.Fatalf("rank %d block %d: %v", r, j, err)
			}
			nnz += b.NNZ()
			// Spot-check every entry against the global matrix.
			for i := 0; i < b.Rows; i++ {
				gi := s.Row0() + i
				for q := b.RowPtr[i]; q < b.RowPtr[i+1]; q++ {
					gj := int(s.Offsets[j]) + int(b.ColIdx[q])
					found := false
					for z := p.AHat.RowPtr[gi]; z < p.AHat.RowPtr[gi+1]; z++ {
						if int(p.AHat.ColIdx[z]) == gj && p.AHat.Val[z] == b.Val[q] {
							found = true
						}
					}
					if !found {
						t.Fatalf("rank %d block %d entry (%d,%d) not in Â", r, j, gi, gj)
					}
				}
			}
		}
	}
	if nnz != p.AHat.NNZ() {
		t.Fatalf("blocks hold %d nonzeros, Â has %d", nnz, p.AHat.NNZ())
	}
}

func TestBalancedRanges(t *testing.T) {
	p := coraPrepared(t, 4)
	off := p.Offsets
	var load []int64
	for r := 0; r < 4; r++ {
		load = append(load, p.AHat.RowPtr[off[r+1]]-p.AHat.RowPtr[off[r]]+off[r+1]-off[r])
	}
	var mx, sum int64
	for _, l := range load {
		mx, sum = max(mx, l), sum+l
	}
	if float64(mx)/(float64(sum)/4) > 1.05 {
		t.Fatalf("nonzero balance %v is off by more than 5%%", load)
	}
	if _, err := BalancedRanges(p.AHat, p.AHat.Rows+1); err == nil {
		t.Fatal("more parts than rows accepted")
	}
}

// TestStreamingPrepareEqualsInMemory: shards written by the streaming
// preparation are byte-identical to those of the in-memory one, for every
// input format, with and without a partition.
func TestStreamingPrepareEqualsInMemory(t *testing.T) {
	gen := t.TempDir()
	if err := graph.Generate(gen, graph.GenConfig{Model: "planted", Nodes: 2000, Edges: 12000, Features: 16, FeatureNNZ: 3,
		Classes: 4, PIn: 0.5, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		data   string
		random bool // generated edges repeat: cut by a partition, not by degree
	}{
		{"../../testdata/cora", false},
		{"../../testdata/karate", false},
		{"../../testdata/polblogs", false},
		{"../../testdata/cora", true},
		{gen, true},
	}
	for _, c := range cases {
		load := graph.LoadOptions{NormalizeFeatures: true, SplitSeed: 1}
		ds, err := graph.Load(c.data, load)
		if err != nil {
			t.Fatal(err)
		}
		var assign []int32
		if c.random {
			assign = make([]int32, ds.N)
			for v := range assign {
				assign[v] = int32((v * 7) % 3)
			}
		}
		mem, stream := t.TempDir(), t.TempDir()
		prep, err := InMemory(ds, 3, Options{Precompute: shard.Aggregations, Parts: assign})
		if err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 3; r++ {
			s, _ := prep.Shard(r)
			if err := s.Write(mem); err != nil {
				t.Fatal(err)
			}
		}
		seen := 0
		sp, err := Streaming(c.data, stream, 3, Options{Precompute: shard.Aggregations, Parts: assign, OnShard: func(*shard.Shard) { seen++ }}, load)
		if err != nil {
			t.Fatal(err)
		}
		if seen != 3 || sp.NNZ() != prep.AHat.NNZ() {
			t.Fatalf("%s: %d shards seen, nnz %d vs %d", c.data, seen, sp.NNZ(), prep.AHat.NNZ())
		}
		for r := 0; r < 3; r++ {
			a, _ := os.ReadFile(filepath.Join(mem, shard.FileName(r, 3)))
			b, _ := os.ReadFile(filepath.Join(stream, shard.FileName(r, 3)))
			if len(a) == 0 || string(a) != string(b) {
				t.Fatalf("%s (partition %v): shard %d differs between in-memory and streaming preparation", c.data, c.random, r)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(stream, ".prepare-*")); len(left) > 0 {
			t.Fatalf("temporary files left: %v", left)
		}
	}
}

// TestMeanOfNeighbours: every shard's D⁻¹AX rows are the mean of the
// node's neighbours' feature rows (self excluded), summed here directly
// from the adjacency; ÂX is left to the equivalence tests.
func TestMeanOfNeighbours(t *testing.T) {
	p := coraPrepared(t, 3)
	a, x := p.DS.Adj, p.DS.Features.ToDense()
	for r := 0; r < 3; r++ {
		s, err := p.Shard(r)
		if err != nil {
			t.Fatal(err)
		}
		got := s.MX.CSR.ToDense()
		want := make([]float64, x.Cols)
		for i := range s.Rows() {
			v := s.Row0() + i
			clear(want)
			deg := a.RowPtr[v+1] - a.RowPtr[v]
			for q := a.RowPtr[v]; q < a.RowPtr[v+1]; q++ {
				for c, f := range x.Row(int(a.ColIdx[q])) {
					want[c] += float64(f) / float64(deg)
				}
			}
			for c, w := range want {
				if d := math.Abs(float64(got.Row(i)[c]) - w); d > 1e-6 {
					t.Fatalf("rank %d row %d column %d: D⁻¹AX %g, neighbours' mean %g", r, i, c, got.Row(i)[c], w)
				}
			}
		}
	}
}

// TestStreamingReusesNodeData: node data read beforehand (as a partitioner
// that needs the split reads it) gives the shards Streaming writes when it
// reads the node data itself, byte for byte; and it is what Streaming
// uses (half the training nodes give other shards).
func TestStreamingReusesNodeData(t *testing.T) {
	const data = "../../testdata/cora"
	load := graph.LoadOptions{NormalizeFeatures: true, SplitSeed: 1}
	s, err := graph.OpenEdgeStream(data)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := graph.LoadNodeData(data, s.N, load)
	if err != nil {
		t.Fatal(err)
	}
	assign := make([]int32, nodes.N)
	for v := range assign {
		assign[v] = int32((v * 5) % 2)
	}
	own, given := t.TempDir(), t.TempDir()
	for _, c := range []struct {
		dir   string
		nodes *graph.Dataset
	}{{own, nil}, {given, nodes}} {
		if _, err := Streaming(data, c.dir, 2, Options{Precompute: shard.Aggregations, Parts: assign, Nodes: c.nodes}, load); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 2 {
		a, _ := os.ReadFile(filepath.Join(own, shard.FileName(r, 2)))
		b, _ := os.ReadFile(filepath.Join(given, shard.FileName(r, 2)))
		if len(a) == 0 || string(a) != string(b) {
			t.Fatalf("shard %d differs when Streaming is given the node data", r)
		}
	}
	nodes.Train = nodes.Train[:len(nodes.Train)/2]
	if _, err := Streaming(data, given, 2, Options{Precompute: shard.Aggregations, Parts: assign, Nodes: nodes}, load); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(own, shard.FileName(0, 2)))
	b, _ := os.ReadFile(filepath.Join(given, shard.FileName(0, 2)))
	if string(a) == string(b) {
		t.Fatal("Streaming read the node data again instead of taking the given one")
	}
}

package sample

import (
	"reflect"
	"testing"
	"time"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/src/shard"
)

// Time steps sampled together, pre-gathered or not, hold the blocks,
// labels and feature rows (dense, int8 and sparse) that sampling each in
// turn with Sample does, asking for fewer bytes of neighbours where the
// time steps share vertices, and pre-gathered in fewer feature bytes.
func TestPregatherFetchesTheSameRows(t *testing.T) {
	g := newTestGraph(120, 300, 7)
	steps := [][][]int64{{{3, 17, 25, 33}, {40, 41, 50, 55}, {77, 80, 100}}, {{90, 118, 61, 70}, {0, 5, 10}, {}}}
	for _, o := range []Options{
		{Fanouts: []int{3, 2}, Weights: shard.Sym, Seed: 5, Wire: wire.FP32},
		{Fanouts: []int{3, 2}, Weights: shard.Mean, Seed: 5, Wire: wire.Format(8)},
		{Fanouts: []int{3, 2}, Weights: shard.Sym, Seed: 5, Wire: wire.FP32, Sparse: true},
	} {
		var got [2][2][]*Batch
		var alone [2][]*Batch
		err := collectives.NewWorld(2, time.Minute).Run(func(c collectives.Comm) error {
			s, err := New(c, g.rankGraph(c.Rank(), 2), o)
			if err != nil {
				return err
			}
			for _, sd := range steps[c.Rank()] {
				b, err := s.Sample(9, sd)
				if err != nil {
					return err
				}
				alone[c.Rank()] = append(alone[c.Rank()], b)
			}
			for i, pre := range []bool{false, true} {
				if got[i][c.Rank()], err = s.SampleSteps(9, steps[c.Rank()], pre); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var plain, pre, asked, askedAlone int64
		for r := range 2 {
			for k, b := range got[0][r] {
				q, a := got[1][r][k], alone[r][k]
				if !reflect.DeepEqual(edgesOf(b), edgesOf(a)) || !reflect.DeepEqual(b.X, a.X) || !reflect.DeepEqual(b.XSparse, a.XSparse) || !reflect.DeepEqual(b.Labels, a.Labels) {
					t.Fatalf("%+v rank %d time step %d: sampled with the others, the batch differs from Sample's", o, r, k)
				}
				asked, askedAlone = asked+b.Counts.BytesSent-b.Counts.FeatureBytes, askedAlone+a.Counts.BytesSent-a.Counts.FeatureBytes
				if !reflect.DeepEqual(edgesOf(b), edgesOf(q)) || !reflect.DeepEqual(b.X, q.X) || !reflect.DeepEqual(b.XSparse, q.XSparse) || !reflect.DeepEqual(b.Labels, q.Labels) {
					t.Fatalf("%+v rank %d time step %d: pre-gathered batch differs", o, r, k)
				}
				plain, pre = plain+b.Counts.FeatureBytes, pre+q.Counts.FeatureBytes
			}
		}
		if pre >= plain || pre == 0 {
			t.Fatalf("%+v: %d feature bytes pre-gathered, %d in turn", o, pre, plain)
		}
		if asked >= askedAlone || asked == 0 {
			t.Fatalf("%+v: %d bytes of sampling and requests together, %d in turn", o, asked, askedAlone)
		}
	}
}

// Locality counts each micrograph's distinct non-root vertices and those
// on its root's home: all of them at P = 1; at P = 2, of a root's layer-1
// neighbours (a fanout of one layer), those in its own half of the ids.
func TestLocalityCountsTheMicrographs(t *testing.T) {
	g := newTestGraph(120, 300, 7)
	seeds := []int64{3, 17, 40, 77, 90}
	o := Options{Fanouts: []int{4}, Weights: shard.Mean, Seed: 5, Wire: wire.FP32}
	for _, p := range []int{1, 2} {
		bs := make([]*Batch, p)
		var co, all [2]int64
		err := collectives.NewWorld(p, time.Minute).Run(func(c collectives.Comm) error {
			s, err := New(c, g.rankGraph(c.Rank(), p), o)
			if err != nil {
				return err
			}
			mine := seeds
			if c.Rank() > 0 {
				mine = nil
			}
			if bs[c.Rank()], err = s.Sample(2, mine); err != nil {
				return err
			}
			co[c.Rank()], all[c.Rank()] = s.Locality(bs[c.Rank()])
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var wantCo, wantAll int64
		b := bs[0].Blocks[0]
		for i, v := range b.Dst {
			for q := b.Adj.RowPtr[i]; q < b.Adj.RowPtr[i+1]; q++ {
				if u := b.Src[b.Adj.ColIdx[q]]; u != v {
					wantAll++
					if p == 1 || (u < 60) == (v < 60) {
						wantCo++
					}
				}
			}
		}
		if co[0] != wantCo || all[0] != wantAll || wantAll == 0 || (p == 2 && wantCo == wantAll) {
			t.Fatalf("P=%d: locality %d of %d, want %d of %d", p, co[0], all[0], wantCo, wantAll)
		}
	}
}

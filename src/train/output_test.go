package train

import (
	"fmt"
	"testing"
	"time"

	"sancus/collectives"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/prepare"
	"sancus/src/shard"
)

// TestRestrictedBlocksReadTrainingRows: the last layer computed only where
// the loss reads it (TestEquivalences: it trains what --full-output
// trains) does skip work: its training blocks hold only the training
// rows' entries, its backward only the training columns, and layer 1
// multiplies at the rows the last layer uses.
func TestRestrictedBlocksReadTrainingRows(t *testing.T) {
	ds, _ := generated(t)
	// The restricted blocks: forward rows only at training rows, backward
	// columns only at training nodes, over all ranks.
	prep, err := prepare.InMemory(ds, 3, prepare.Options{Precompute: shard.Aggregations})
	if err != nil {
		t.Fatal(err)
	}
	isTrain := make([]bool, ds.N)
	for _, v := range ds.Train {
		isTrain[v] = true
	}
	err = collectives.NewWorld(3, time.Minute).Run(func(c collectives.Comm) error {
		s, err := prep.Shard(c.Rank())
		if err != nil {
			return err
		}
		cfg := Defaults()
		cfg.Model.Hidden = 4 // aggregate first: its products with W run at the training rows
		e, err := New(cfg, c, s)
		if err != nil {
			return err
		}
		defer e.Close()
		if _, ok := e.layers[len(e.layers)-1].(*aggregateLayer); !ok || e.out.rowOps == nil {
			return fmt.Errorf("rank %d: the last layer (%s) does not multiply at the training rows", e.rank, e.layers[len(e.layers)-1].kind())
		}
		if first, ok := e.layers[0].(*localLayer); !ok || first.ri == nil || len(first.read) == 0 || len(first.written) == 0 {
			return fmt.Errorf("rank %d: layer 1 (%s) does not multiply at the rows the last layer uses", e.rank, e.layers[0].kind())
		}
		last := e.layers[len(e.layers)-1].base()
		for j := range e.P {
			fwd, grad, whole := last.fwd.blocks[j], last.grad.blocks[j], last.fwd.full[j]
			for r := range whole.Rows {
				n, want := fwd.RowPtr[r+1]-fwd.RowPtr[r], whole.RowPtr[r+1]-whole.RowPtr[r]
				if train := isTrain[e.ownID(r)]; (train && n != want) || (!train && n != 0) {
					return fmt.Errorf("rank %d block %d row %d (training %v): %d of %d entries", e.rank, j, r, train, n, want)
				}
			}
			for _, c := range []*cache{last.fwd, last.grad} { // P = 3 under the sparse exchange: held slots
				if c.held == nil || (j != e.rank && c.rows[j] != len(columnsUsed(c.blocks[j]))) {
					return fmt.Errorf("rank %d %s: slot %d holds %d rows (held %v), its block reads %d", e.rank, c.name, j, c.rows[j], c.held != nil, len(columnsUsed(c.blocks[j])))
				}
			}
			var kept int64
			for _, col := range grad.ColIdx {
				if held := last.grad.held; held != nil && held[j] != nil {
					col = held[j][col] // the slot holds only the rows read (hold)
				}
				if !isTrain[e.srcID(j, int(col))] {
					return fmt.Errorf("rank %d block %d: backward keeps column %d, not a training node", e.rank, j, col)
				}
				kept++
			}
			var trainCols int64
			for _, col := range whole.ColIdx {
				if isTrain[e.srcID(j, int(col))] {
					trainCols++
				}
			}
			if kept != trainCols {
				return fmt.Errorf("rank %d block %d: backward keeps %d of the %d entries in training columns", e.rank, j, kept, trainCols)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGATRestrictedBlocks: a GAT's last layer attends at its training
// targets alone and sums its neighbour side over them alone, on one rank
// (the gradient rows' blocks) and where the sums are reduced (the
// transposed blocks); with dense broadcasts, whose gradient rows travel
// whole, it keeps the full blocks.
func TestGATRestrictedBlocks(t *testing.T) {
	ds, _ := generated(t)
	isTrain := make([]bool, ds.N)
	for _, v := range ds.Train {
		isTrain[v] = true
	}
	for _, tc := range []struct {
		p          int
		dense      bool
		restricted bool
	}{{1, false, true}, {3, false, true}, {3, true, false}} {
		prep, err := prepare.InMemory(ds, tc.p, prepare.Options{Precompute: shard.Aggregations})
		if err != nil {
			t.Fatal(err)
		}
		err = collectives.NewWorld(tc.p, time.Minute).Run(func(c collectives.Comm) error {
			s, err := prep.Shard(c.Rank())
			if err != nil {
				return err
			}
			cfg := Defaults()
			cfg.Model.Arch, cfg.Model.Heads, cfg.Model.Hidden, cfg.Exchange.Dense = model.ArchGAT, 2, 4, tc.dense
			e, err := New(cfg, c, s)
			if err != nil {
				return err
			}
			defer e.Close()
			L := e.layers[len(e.layers)-1].(*gatLayer)
			// trainOnly reports whether b's entries lie only in training rows
			// (or columns), and whether every entry was kept where the full
			// block has training rows (columns).
			trainOnly := func(b, full *matrix.CSR, rowID, colID func(int) int64, byRow bool) error {
				kept, want := 0, 0
				for r := range full.Rows {
					for p := full.RowPtr[r]; p < full.RowPtr[r+1]; p++ {
						id := rowID(r)
						if !byRow {
							id = colID(int(full.ColIdx[p]))
						}
						if isTrain[id] {
							want++
						}
					}
					for p := b.RowPtr[r]; p < b.RowPtr[r+1]; p++ {
						id := rowID(r)
						if !byRow {
							id = colID(int(b.ColIdx[p]))
						}
						if !isTrain[id] {
							return fmt.Errorf("keeps an entry of node %d, not a training node", id)
						}
						kept++
					}
				}
				if kept != want {
					return fmt.Errorf("keeps %d of the %d entries at training nodes", kept, want)
				}
				return nil
			}
			own := func(r int) int64 { return e.ownID(r) }
			for j := range e.P {
				fwd, full := L.fwd.blocks[j], L.fwd.full[j]
				if !tc.restricted {
					if fwd != full || (L.grad != nil && L.grad.blocks[j] != L.grad.full[j]) {
						return fmt.Errorf("rank %d block %d: restricted where gradient rows travel whole", e.rank, j)
					}
					continue
				}
				if err := trainOnly(fwd, full, own, nil, true); err != nil {
					return fmt.Errorf("rank %d forward block %d: %w", e.rank, j, err)
				}
				src := func(k int) int64 { return e.srcID(j, k) }
				switch {
				case L.grad != nil: // one rank: the gradient rows' blocks
					if err := trainOnly(L.grad.blocks[j], L.grad.full[j], own, src, false); err != nil {
						return fmt.Errorf("rank %d gradient block %d: %w", e.rank, j, err)
					}
				case j == e.rank:
					if err := trainOnly(L.nbrOwn, full, own, own, false); err != nil {
						return fmt.Errorf("rank %d own neighbour block: %w", e.rank, err)
					}
				default: // rows: j's, columns: this rank's targets
					if err := trainOnly(L.nbrT[j], e.part.blockT[j], src, own, false); err != nil {
						return fmt.Errorf("rank %d neighbour block of %d: %w", e.rank, j, err)
					}
				}
			}
			if tc.restricted && tc.p > 1 && L.red == nil {
				return fmt.Errorf("rank %d: the neighbour side is not reduced", e.rank)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("P=%d dense=%v: %v", tc.p, tc.dense, err)
		}
	}
}

// TestEngineHoldsOneInput: layer 1 reads ÂX, X, or D⁻¹AX and X, and the
// engine holds and counts only those (the caller's shard keeps them all).
func TestEngineHoldsOneInput(t *testing.T) {
	ds, _ := generated(t)
	prep, err := prepare.InMemory(ds, 2, prepare.Options{Precompute: shard.Aggregations})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		arch       model.Arch
		precompute bool
		x          bool              // the engine holds X
		reads      shard.Aggregation // and this product
	}{
		{model.ArchGCN, true, false, shard.Sym},
		{model.ArchGCN, false, true, 0},
		{model.ArchSAGE, true, true, shard.Mean},
		{model.ArchSAGE, false, true, 0},
	}
	for _, tc := range cases {
		err = collectives.NewWorld(2, time.Minute).Run(func(c collectives.Comm) error {
			s, err := prep.Shard(c.Rank())
			if err != nil {
				return err
			}
			cfg := Defaults()
			cfg.Model.Arch, cfg.Model.Precompute = tc.arch, tc.precompute
			e, err := New(cfg, c, s)
			if err != nil {
				return err
			}
			defer e.Close()
			if s.Features == nil || !s.Holds(shard.Aggregations) {
				return fmt.Errorf("rank %d: the caller's shard lost X or a product", e.rank)
			}
			if held := e.s.Features != nil; held != tc.x {
				return fmt.Errorf("rank %d: engine holds X %v, want %v", e.rank, held, tc.x)
			}
			for _, g := range []shard.Aggregation{shard.Sym, shard.Mean} {
				if g != tc.reads && e.s.Of(g).Held() {
					return fmt.Errorf("rank %d: the engine holds %v, which layer 1 does not read", e.rank, g)
				}
			}
			if counted := e.tally.inputBytes != 0; counted != (tc.reads != 0) {
				return fmt.Errorf("rank %d: %d compulsory bytes of a product counted, reading %v", e.rank, e.tally.inputBytes, tc.reads)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v, precompute %v: %v", tc.arch, tc.precompute, err)
		}
	}
}

// TestNoTrainingRowsComputesNone: on Cora's planetoid split rank 1 of 2
// holds no training rows, and its training pass computes no row of the
// restricted last layer (its row list is empty, not nil: a nil one made
// the products unrestricted), for either order of that layer.
func TestNoTrainingRowsComputesNone(t *testing.T) {
	for _, hidden := range []int{16, 4} { // transform first, aggregate first (7 classes)
		cfg := Defaults()
		cfg.Model.Hidden = hidden
		onRanks(t, loadCora(t), 2, cfg, func(e *Engine) error {
			defer e.Close()
			for _, b := range e.m.B { // as after some training: a bias added to a row shows
				for i := range b {
					b[i] = 0.5
				}
			}
			if _, err := e.trainStep(0); err != nil {
				return err
			}
			if len(e.s.Train) > 0 {
				return nil
			}
			if e.out.rowOps == nil {
				return fmt.Errorf("rank %d: the last layer is not restricted", e.rank)
			}
			for i, v := range e.layers[len(e.layers)-1].base().z.Data {
				if v != 0 {
					return fmt.Errorf("rank %d, hidden %d: logit %d is %g, computed for no training row", e.rank, hidden, i, v)
				}
			}
			return nil
		})
	}
}

package train

import (
	"fmt"
	"testing"
	"time"

	"sancus/collectives"
	"sancus/src/prepare"
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
	prep, err := prepare.InMemory(ds, 3, prepare.Options{Precompute: true})
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

// TestEngineHoldsOneInput: layer 1 reads ÂX or X, and the engine holds
// and counts only that one (the caller's shard keeps both).
func TestEngineHoldsOneInput(t *testing.T) {
	ds, _ := generated(t)
	prep, err := prepare.InMemory(ds, 2, prepare.Options{Precompute: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, fromAX := range []bool{true, false} {
		err = collectives.NewWorld(2, time.Minute).Run(func(c collectives.Comm) error {
			s, err := prep.Shard(c.Rank())
			if err != nil {
				return err
			}
			cfg := Defaults()
			cfg.Model.Precompute = fromAX
			e, err := New(cfg, c, s)
			if err != nil {
				return err
			}
			defer e.Close()
			ax := s.AX.Bytes()
			if s.AXDense != nil {
				ax += 4 * int64(len(s.AXDense.Data))
			}
			if s.Features == nil || ax == 0 {
				return fmt.Errorf("rank %d: the caller's shard lost X or ÂX", e.rank)
			}
			held := e.s.Features != nil
			if !fromAX {
				held = e.s.AX != nil || e.s.AXDense != nil
			}
			if held {
				return fmt.Errorf("rank %d (ÂX read: %v): the engine holds the input layer 1 does not read", e.rank, fromAX)
			}
			if !fromAX && e.tally.inputBytes != 0 {
				return fmt.Errorf("rank %d: ÂX, not read, counted as %d compulsory bytes", e.rank, e.tally.inputBytes)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
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

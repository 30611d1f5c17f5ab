package train

import (
	"fmt"
	"math"
	"testing"
	"time"

	"sancus/collectives"
	"sancus/src/prepare"
)

// TestRestrictedOutputEqualsFull: computing the last layer only where the
// loss reads it trains the same model as --full-output — losses to 1e-6
// relative, accuracies exactly — for either order of the last layer,
// with and without ÂX, under variation-gap staleness, int8 on the wire,
// multi-label, dense broadcasts, at P = 1 and 3; and it does skip work:
// the last layer's training blocks hold only the training rows' entries,
// and the sparse exchange moves fewer bytes (dense broadcasts the same).
// An aggregate-first last layer on ÂX also takes layer 1's rows dropped as
// layer 1 wrote them (nextDrops), which --full-output does not.
func TestRestrictedOutputEqualsFull(t *testing.T) {
	ds, _ := generated(t)
	multi := generatedMulti(t)
	for _, run := range []struct {
		name   string
		hidden int
		pre    bool
		vargap bool
		multi  bool
		wire   string
		dense  bool
	}{
		{"transform-first last layer", 16, true, false, false, "fp32", false},
		{"aggregate-first last layer", 4, true, false, false, "fp32", false},
		{"plain Â(XW), variation-gap", 16, false, true, false, "fp32", false},
		{"ÂX, variation-gap", 4, true, true, false, "fp32", false},
		{"int8 wire", 4, false, false, false, "int8", false},
		{"multi-label", 16, true, false, true, "fp32", false},
		{"dense broadcasts", 4, false, false, false, "fp32", true},
	} {
		for _, p := range []int{1, 3} {
			cfg := Defaults()
			cfg.Optim.Epochs, cfg.Model.Hidden, cfg.Model.Precompute, cfg.Wire.Fwd, cfg.Exchange.Dense = 15, run.hidden, run.pre, run.wire, run.dense
			if run.vargap {
				cfg.Staleness.Policy, cfg.Staleness.Eps = "variation-gap", 0.3 // loose enough to skip within 15 epochs
			}
			data := ds
			if run.multi {
				data = multi
			}
			full := cfg
			full.Exchange.FullOutput = true
			want, err := RunInProcess(data, p, full)
			if err != nil {
				t.Fatal(err)
			}
			got, err := RunInProcess(data, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var bytes, fullBytes int64
			skipped := 0
			for i, g := range got.Result.Curve {
				w := want.Result.Curve[i]
				if math.Abs(g.Loss-w.Loss) > 1e-6*w.Loss || g.ValAcc != w.ValAcc || g.TestAcc != w.TestAcc || g.Sent != w.Sent {
					t.Fatalf("%s P=%d epoch %d: loss %.9f val %.4f test %.4f sent %d; full output %.9f %.4f %.4f %d",
						run.name, p, g.Epoch, g.Loss, g.ValAcc, g.TestAcc, g.Sent, w.Loss, w.ValAcc, w.TestAcc, w.Sent)
				}
				bytes, fullBytes = bytes+g.BytesSent, fullBytes+w.BytesSent
				skipped += g.Skipped
			}
			if run.vargap && p > 1 && skipped == 0 { // else the votes compared above decided nothing
				t.Fatalf("%s P=%d: variation-gap skipped no broadcast", run.name, p)
			}
			if p > 1 && (run.dense != (bytes == fullBytes) || bytes > fullBytes) {
				t.Fatalf("%s P=%d: %d bytes sent against %d with --full-output", run.name, p, bytes, fullBytes)
			}
			t.Logf("%s P=%d: %d bytes sent, %d with --full-output", run.name, p, bytes, fullBytes)
		}
	}

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

package train

import (
	"slices"
	"sync"
	"testing"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/prepare"
)

// rowChecker is the CPU backend with every sparse product that adds to
// its output watched: of the rows each is handed, it counts those where
// the block holds no entry (they add nothing, and cost a pass).
type rowChecker struct {
	kernels.CPU
	mu           sync.Mutex
	added, empty int64
}

func (r *rowChecker) note(a *matrix.CSR, rows []int32) {
	n, empty := int64(a.Rows), int64(0)
	if rows != nil {
		n = int64(len(rows))
		for _, row := range rows {
			if a.RowPtr[row+1] == a.RowPtr[row] {
				empty++
			}
		}
	} else {
		for row := range a.Rows {
			if a.RowPtr[row+1] == a.RowPtr[row] {
				empty++
			}
		}
	}
	r.mu.Lock()
	r.added, r.empty = r.added+n, r.empty+empty
	r.mu.Unlock()
}

func (r *rowChecker) SpMM(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, acc bool) error {
	if acc {
		r.note(a, nil)
	}
	return r.CPU.SpMM(c, a, b, acc)
}

func (r *rowChecker) SpMMRows(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, rows []int32, acc bool) error {
	if acc {
		r.note(a, rows)
	}
	return r.CPU.SpMMRows(c, a, b, rows, acc)
}

func (r *rowChecker) SpMMOccupied(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, o kernels.OccupiedRows, acc bool) error {
	if acc {
		r.note(a, o.Rows)
	}
	return r.CPU.SpMMOccupied(c, a, b, o, acc)
}

func (r *rowChecker) SpMMColumns(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, cr kernels.ColumnRange, acc bool) error {
	if acc && cr.First { // the later ranges pass the same rows
		r.note(a, cr.Rows)
	}
	return r.CPU.SpMMColumns(c, a, b, cr, acc)
}

// TestBlockProductsPassOccupiedRows: at P = 4, where most of a block's
// rows are empty, every block product that adds to the output (GCN and
// GraphSAGE, the restricted last layer's forward and gradient blocks,
// whole and packed caches) is handed only rows the block has entries in.
func TestBlockProductsPassOccupiedRows(t *testing.T) {
	ds, _ := generated(t)
	for _, tc := range []struct {
		name string
		set  func(c *Config)
	}{
		{"gcn", func(c *Config) {}},
		{"gcn aggregating first", func(c *Config) { c.Model.Hidden = 4 }},
		{"sage", func(c *Config) { c.Model.Arch = model.ArchSAGE }},
		{"full output", func(c *Config) { c.Exchange.FullOutput = true }},
		{"cache bits", func(c *Config) { c.Wire.Fwd, c.Wire.CacheBits = format("int8"), true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := &rowChecker{}
			cfg := Defaults()
			cfg.Optim.Epochs, cfg.Run.Backend = 2, be
			tc.set(&cfg)
			if _, err := runPrepared(ds, 4, cfg, prepare.Options{Precompute: cfg.Precomputed()}); err != nil {
				t.Fatal(err)
			}
			if be.added == 0 || be.empty > 0 {
				t.Fatalf("%d of the %d rows handed to products that add were empty", be.empty, be.added)
			}
		})
	}
}

// TestOwnFirstOrder: this rank's block, then the others by root, with
// nothing made each exchange.
func TestOwnFirstOrder(t *testing.T) {
	if got := slices.Collect(ownFirst(2, 4)); !slices.Equal(got, []int{2, 0, 1, 3}) {
		t.Fatalf("order %v, want [2 0 1 3]", got)
	}
	sum := 0
	if n := testing.AllocsPerRun(10, func() {
		for j := range ownFirst(1, 512) {
			sum += j
		}
	}); n != 0 {
		t.Fatalf("%g allocations an order", n)
	}
}

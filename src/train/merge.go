package train

import (
	"fmt"

	"sancus/kernels"
	"sancus/kernels/matrix"
)

// Merged peer blocks. At P ranks a rank's block row of Â splits into P
// blocks, and past a few dozen ranks each holds well under one nonzero a
// row: a product per block then loads and stores an output row for about
// every nonzero, where one product over the same nonzeros stores each row
// once. So runs of consecutive peers' blocks are merged, once at set-up,
// into one block whose columns are rows of the slab holding every slot,
// and a run is multiplied as one product when its last block is usable:
// as many runs as keep MergeDepth nonzeros in each row a run's block
// occupies, so products still overlap transfers wherever blocks are deep
// enough to be worth it (at a few ranks, every run is one block). Each
// row adds its nonzeros in the order the blocks one by one would, so the
// sums are theirs bit for bit.

// MergeDepth is the nonzeros a row of a merged run's block aims at.
const MergeDepth = 4

// MergeRuns is how many runs a rank's peer blocks are merged into: peerNNZ
// nonzeros in peerRows rows that hold any, over peers blocks.
func MergeRuns(peerNNZ, peerRows int64, peers int) int {
	if peers <= 0 || peerRows <= 0 {
		return max(peers, 0)
	}
	return int(min(int64(peers), max(1, peerNNZ/(MergeDepth*peerRows))))
}

// RunOf is the run of a rank's k-th peer (by root, the rank left out) of
// peers, merged into runs runs: consecutive peers, as many to a run.
func RunOf(k, peers, runs int) int { return k * runs / peers }

// merged is a cache's runs of peer blocks, made once at set-up (mergeRuns)
// for the blocks it then multiplies.
type merged struct {
	of   []int // of[j]: root j's run; -1: its block is multiplied alone
	runs []mergedRun
	slab *matrix.Dense // every slot, as the runs' columns number its rows
	made []*matrix.CSR // the blocks merged (a cluster batch's are not)
	left []int         // in an exchange, each run's roots not yet usable
}

// mergedRun is one run: how many roots, and their blocks side by side with
// the rows that hold entries.
type mergedRun struct {
	roots int
	block *matrix.CSR
	occ   kernels.OccupiedRows
}

// slotsLaid places the peers' slots in buf one after the other, by root,
// and keeps them as the slab merged runs read (the same rows in any cache
// over the same blocks); with own, this rank's slot after them.
func (c *cache) slotsLaid(be kernels.Backend, buf []float32, own bool) {
	c.slabAt = make([]int, len(c.rows))
	off := 0
	place := func(j int) {
		n := c.rows[j] * c.width
		c.host[j] = buf[off : off+n : off+n]
		c.dev[j] = be.Mirror(c.host[j], c.rows[j], c.width)
		off += n
	}
	for j := range c.rows {
		if j != c.me {
			c.slabAt[j] = off / max(1, c.width)
			place(j)
		}
	}
	c.slab = buf[:off]
	c.slabAt[c.me] = -1 // not in the slab, even where it follows it
	if own {
		place(c.me)
	}
}

// slotFloats is what the peers' slots take, in floats, with this rank's
// too where own is set.
func (c *cache) slotFloats(own bool) int {
	n := 0
	for j, r := range c.rows {
		if j != c.me || own {
			n += r * c.width
		}
	}
	return n
}

// mergeRuns merges the cache's peer blocks into runs (MergeRuns), where
// the backend computes on the slab itself and the cache multiplies float
// slots; a run of one block is left alone. seen shares a run's block
// between caches over the same blocks and slots.
func (c *cache) mergeRuns(be kernels.Backend, seen map[runKey]mergedRun) {
	if c.slab == nil || c.width == 0 || len(c.blocks) < 3 || c.ranges != nil {
		return
	}
	for j, d := range c.dev {
		if j != c.me && d != nil && d.Dev != nil { // the products read device copies, slot by slot
			return
		}
	}
	var nnz int64
	occupied := make([]bool, c.blocks[c.me].Rows)
	for j, b := range c.blocks {
		if j == c.me {
			continue
		}
		nnz += b.NNZ()
		for r := range b.Rows {
			occupied[r] = occupied[r] || b.RowPtr[r+1] > b.RowPtr[r]
		}
	}
	rows := int64(0)
	for _, o := range occupied {
		if o {
			rows++
		}
	}
	peers := len(c.blocks) - 1
	n := MergeRuns(nnz, rows, peers)
	if n == peers {
		return
	}
	slab := be.Mirror(c.slab, len(c.slab)/c.width, c.width) // the host slab itself (no Dev, above)
	m := &merged{of: make([]int, len(c.blocks)), runs: make([]mergedRun, n), slab: slab, made: c.blocks, left: make([]int, n)}
	lo := make([]int, n+1) // run r's roots: peers lo[r] .. lo[r+1]-1
	for k := range peers {
		lo[RunOf(k, peers, n)+1] = k + 1
	}
	m.of[c.me] = -1
	for r := range n {
		roots := make([]int, 0, lo[r+1]-lo[r])
		for k := lo[r]; k < lo[r+1]; k++ {
			j := k
			if k >= c.me {
				j++
			}
			roots = append(roots, j)
			m.of[j] = r
		}
		key := runKey{c.blocks[roots[0]], c.blocks[roots[len(roots)-1]], c.slabAt[roots[0]]}
		run, ok := seen[key]
		if !ok {
			run = mergedRun{roots: len(roots), block: c.mergedBlock(roots)}
			if run.occ = kernels.Occupied(run.block); len(run.occ.Rows) == run.block.Rows {
				run.occ = kernels.OccupiedRows{} // every row: none listed
			}
			seen[key] = run
		}
		m.runs[r] = run
	}
	c.merge = m
}

// runKey names a run's block: its first and last blocks and where the
// first's rows sit in the slab.
type runKey struct {
	first, last *matrix.CSR
	at          int
}

// mergedBlock is the blocks of roots side by side, each row's nonzeros in
// root order, their columns the slab's rows.
func (c *cache) mergedBlock(roots []int) *matrix.CSR {
	rows := c.blocks[roots[0]].Rows
	m := &matrix.CSR{Rows: rows, Cols: len(c.slab) / c.width, RowPtr: make([]int64, rows+1)}
	for _, j := range roots {
		b := c.blocks[j]
		for r := range rows {
			m.RowPtr[r+1] += b.RowPtr[r+1] - b.RowPtr[r]
		}
	}
	for r := range rows {
		m.RowPtr[r+1] += m.RowPtr[r]
	}
	m.ColIdx, m.Val = make([]int32, m.RowPtr[rows]), make([]float32, m.RowPtr[rows])
	at := append([]int64(nil), m.RowPtr[:rows]...)
	for _, j := range roots {
		b, base := c.blocks[j], int32(c.slabAt[j])
		for r := range rows {
			for p := b.RowPtr[r]; p < b.RowPtr[r+1]; p++ {
				m.ColIdx[at[r]], m.Val[at[r]] = base+b.ColIdx[p], b.Val[p]
				at[r]++
			}
		}
	}
	return m
}

// merging reports whether this product's peer blocks go in runs: the cache
// multiplies the blocks they were made for, and no block is masked apart.
// It readies the runs' counts for the exchange.
func (c *cache) merging(maskedApart bool) bool {
	m := c.merge
	if m == nil || maskedApart || !c.multiplies(m.made) {
		return false
	}
	for r, run := range m.runs {
		m.left[r] = run.roots
	}
	return true
}

// runDone counts root j's block usable and returns its run when that was
// the run's last, or nil.
func (m *merged) runDone(j int) *mergedRun {
	r := m.of[j]
	m.left[r]--
	if m.left[r] > 0 {
		return nil
	}
	return &m.runs[r]
}

// done reports a run whose roots were not all used, which would leave
// its blocks out of the sum.
func (m *merged) done() error {
	for r, n := range m.left {
		if n != 0 {
			return fmt.Errorf("merged run %d: %d of its %d blocks were never used", r, n, m.runs[r].roots)
		}
	}
	return nil
}

// bytes is what the run's block holds, with its occupied rows.
func (r mergedRun) bytes() int64 {
	return r.block.Bytes() + 4*int64(len(r.occ.Rows)) + 8*int64(len(r.occ.Ptr))
}

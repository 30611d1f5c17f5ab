package sample

// Micrographs (HopGNN): a training vertex and its sampled k-hop
// neighbourhood, homed at the rank that owns the vertex. A model-moving
// trainer samples a rank's micrographs of one iteration in several time
// steps; pre-gathering fetches their features once for all of them.

import (
	"slices"
	"time"

	"sancus/kernels/matrix"
)

// Global lists every step's whole global batch of epoch ep: the seeds
// DrawGlobal deals out over the ranks, all of them, in the draw's order.
func (t TrainSet) Global(size int, seed uint64, ep int) Epoch {
	var all []int64
	for _, v := range t.ByRank {
		all = append(all, v...)
	}
	return TrainSet{ByRank: [][]int64{all}, Orig: t.Orig}.Draw(DrawGlobal, size, seed, ep, 0)
}

// Owner is the rank that owns global row v: a micrograph's home.
func (s *Sampler) Owner(v int64) int { return s.owner(v) }

// SampleSteps samples step's micrographs of several time steps, seeds[k]
// the roots this rank trains in time step k, and fetches their features.
// Every time step's blocks are sampled together (one exchange per layer,
// each vertex asked once: its draw is the same in every time step).
// Without pregather each time step then fetches its own rows, as Sample
// does; with it one fetch brings the rows of every time step, each remote
// row once, and each batch reads its rows from them: the same rows, in
// fewer bytes where time steps share vertices. The shared exchanges'
// counts are the first batch's. Every rank must call it with as many time
// steps.
func (s *Sampler) SampleSteps(step uint64, seeds [][]int64, pregather bool) ([]*Batch, error) {
	start := time.Now()
	out, err := s.blocks(step, seeds)
	if err != nil {
		return nil, err
	}
	if !pregather {
		for _, b := range out {
			if err := s.fetch(step, b); err != nil {
				return nil, err
			}
		}
		out[0].Counts.Seconds = time.Since(start).Seconds()
		return out, nil
	}
	var union []int64
	at := map[int64]int{}
	for _, b := range out {
		for _, v := range b.Blocks[0].Src {
			if _, ok := at[v]; !ok {
				at[v] = len(union)
				union = append(union, v)
			}
		}
	}
	all := &Batch{Blocks: []Block{{Src: union}}}
	if err := s.fetch(step, all); err != nil {
		return nil, err
	}
	for k, b := range out {
		idx := make([]int, len(b.Blocks[0].Src))
		for i, v := range b.Blocks[0].Src {
			idx[i] = at[v]
		}
		if all.XSparse != nil {
			b.XSparse = csrRows(all.XSparse, idx)
		} else {
			b.X = matrix.NewDense(len(idx), all.X.Cols)
			for i, j := range idx {
				copy(b.X.Row(i), all.X.Row(j))
			}
		}
		if k == 0 {
			c := all.Counts
			b.Counts.LocalRows, b.Counts.RemoteRows = c.LocalRows, c.RemoteRows
			b.Counts.BytesSent += c.BytesSent
			b.Counts.FeatureBytes += c.FeatureBytes
			b.Counts.Seconds = time.Since(start).Seconds()
		}
	}
	return out, nil
}

// csrRows is x's rows idx, in that order.
func csrRows(x *matrix.CSR, idx []int) *matrix.CSR {
	nnz := int64(0)
	for _, r := range idx {
		nnz += x.RowPtr[r+1] - x.RowPtr[r]
	}
	out := &matrix.CSR{Rows: len(idx), Cols: x.Cols, RowPtr: make([]int64, len(idx)+1), ColIdx: make([]int32, 0, nnz), Val: make([]float32, 0, nnz)}
	for i, r := range idx {
		out.ColIdx = append(out.ColIdx, x.ColIdx[x.RowPtr[r]:x.RowPtr[r+1]]...)
		out.Val = append(out.Val, x.Val[x.RowPtr[r]:x.RowPtr[r+1]]...)
		out.RowPtr[i+1] = int64(len(out.ColIdx))
	}
	return out
}

// Locality counts, over b's micrographs, the distinct non-root vertices of
// each (its root's sampled k-hop neighbourhood, every layer) and those of
// them owned by the root's home rank: HopGNN's R_micro is their ratio,
// measured from the samples.
func (s *Sampler) Locality(b *Batch) (colocated, nonRoot int64) {
	L := len(b.Blocks)
	if L == 0 {
		return 0, 0
	}
	seen := map[int64]bool{}
	var frontier, next []int32
	for i, root := range b.Blocks[L-1].Dst {
		home := s.owner(root)
		clear(seen)
		seen[root] = true
		frontier = append(frontier[:0], int32(i))
		for l := L - 1; l >= 0; l-- {
			blk := b.Blocks[l]
			next = next[:0]
			for _, r := range frontier {
				for p := blk.Adj.RowPtr[r]; p < blk.Adj.RowPtr[r+1]; p++ {
					c := blk.Adj.ColIdx[p]
					next = append(next, c)
					if v := blk.Src[c]; !seen[v] {
						seen[v] = true
						nonRoot++
						if s.owner(v) == home {
							colocated++
						}
					}
				}
			}
			// A block's Dst are the first of its Src: the next layer's rows.
			slices.Sort(next)
			frontier = append(frontier[:0], slices.Compact(next)...)
		}
	}
	return colocated, nonRoot
}

package train

// Sparsity-aware exchange. A dense broadcast hands every rank all of root
// j's block H_j, but rank i only multiplies the rows that Â_ij references.
// Here each rank learns once, at start-up, which of its rows every other
// rank needs; an active root then sends each rank exactly those rows
// (point to point), a stale root sends nothing, and caches hold only the
// rows a rank uses. With a partition that keeps most edges inside blocks,
// that is a small fraction of H. Results are the same as with the dense
// broadcast: the compacted blocks keep their column order, so every sum
// runs in the same order.

import (
	"fmt"
	"math"
	"time"

	"sancus/collectives"
	"sancus/kernels/matrix"
)

const tagSparse = collectives.TagUser + 1

type sparsePlan struct {
	need    [][]int32     // need[j]: root j's local rows this rank uses (sorted); unused for j == rank
	compact []*matrix.CSR // Â_ij with columns renumbered to positions in need[j]
	ids     [][]int64     // global node ids of the rows of compact block j (dropout masks)
	sendIdx [][]int32     // sendIdx[i]: this rank's rows that rank i needs
}

// columnsUsed lists the distinct columns of a block, sorted.
func columnsUsed(b *matrix.CSR) []int32 {
	seen := make([]bool, b.Cols)
	for _, c := range b.ColIdx {
		seen[c] = true
	}
	var out []int32
	for c, s := range seen {
		if s {
			out = append(out, int32(c))
		}
	}
	return out
}

// compactBlock renumbers b's columns to their positions in cols.
func compactBlock(b *matrix.CSR, cols []int32) *matrix.CSR {
	pos := make([]int32, b.Cols)
	for k, c := range cols {
		pos[c] = int32(k)
	}
	out := &matrix.CSR{Rows: b.Rows, Cols: len(cols), RowPtr: b.RowPtr, Val: b.Val, ColIdx: make([]int32, len(b.ColIdx))}
	for p, c := range b.ColIdx {
		out.ColIdx[p] = pos[c]
	}
	return out
}

// newSparsePlan tells every root which of its rows each rank needs (one
// all-to-all of index lists at start-up).
func (e *Engine) newSparsePlan() (*sparsePlan, error) {
	sp := &sparsePlan{need: make([][]int32, e.P), compact: make([]*matrix.CSR, e.P), ids: make([][]int64, e.P), sendIdx: make([][]int32, e.P)}
	sendCounts, recvCounts := make([]int, e.P), make([]int, e.P)
	ones := make([]int, e.P)
	var sendList []float32
	for j, b := range e.s.Blocks {
		ones[j] = 1
		if j == e.rank {
			sp.compact[j] = b
			continue
		}
		sp.need[j] = columnsUsed(b)
		sp.compact[j] = compactBlock(b, sp.need[j])
		sendCounts[j] = len(sp.need[j])
		for _, r := range sp.need[j] {
			sendList = append(sendList, math.Float32frombits(uint32(r))) // exact: indices travel as bits
		}
	}
	if e.P == 1 {
		return sp, nil
	}
	counts := make([]float32, e.P)
	for j := range counts {
		counts[j] = float32(sendCounts[j])
	}
	got := make([]float32, e.P)
	if err := e.c.Alltoallv(counts, ones, got, ones); err != nil {
		return nil, fmt.Errorf("sparse exchange set-up: %w", err)
	}
	total := 0
	for i := range got {
		recvCounts[i] = int(got[i])
		total += recvCounts[i]
	}
	lists := make([]float32, total)
	if err := e.c.Alltoallv(sendList, sendCounts, lists, recvCounts); err != nil {
		return nil, fmt.Errorf("sparse exchange set-up: %w", err)
	}
	off := 0
	var idsOut []float32
	for i := range recvCounts {
		for k := 0; k < recvCounts[i]; k++ {
			r := int32(math.Float32bits(lists[off+k]))
			if r < 0 || int(r) >= e.rows {
				return nil, fmt.Errorf("sparse exchange set-up: rank %d asked for row %d of %d", i, r, e.rows)
			}
			sp.sendIdx[i] = append(sp.sendIdx[i], r)
			idsOut = append(idsOut, math.Float32frombits(uint32(e.ownID(int(r)))))
		}
		off += recvCounts[i]
	}
	// The node ids of the rows each rank receives key its dropout masks.
	idsIn := make([]float32, len(sendList))
	if err := e.c.Alltoallv(idsOut, recvCounts, idsIn, sendCounts); err != nil {
		return nil, fmt.Errorf("sparse exchange set-up: %w", err)
	}
	off = 0
	for j := range sp.need {
		if j == e.rank {
			continue
		}
		sp.ids[j] = make([]int64, len(sp.need[j]))
		for k := range sp.ids[j] {
			sp.ids[j][k] = int64(math.Float32bits(idsIn[off+k]))
		}
		off += len(sp.need[j])
	}
	return sp, nil
}

// ownID is the node id of local row r (original numbering, which dropout
// masks use, so a reordered run draws the masks of the original one).
func (e *Engine) ownID(r int) int64 {
	if e.s.NodeIDs != nil {
		return int64(e.s.NodeIDs[r])
	}
	return e.s.Offsets[e.rank] + int64(r)
}

// rowsOf is how many rows of root j this rank keeps for an exchange.
func (e *Engine) rowsOf(j int) int {
	if e.sparse != nil && j != e.rank {
		return len(e.sparse.need[j])
	}
	return e.s.RowsOf(j)
}

// block is the matrix multiplied with root j's buffer.
func (e *Engine) block(j int) *matrix.CSR {
	if e.sparse != nil {
		return e.sparse.compact[j]
	}
	return e.s.Blocks[j]
}

// maskFor is layer dropout applied to root j's rows as this rank holds them.
func (e *Engine) maskFor(mask matrix.Mask, j int) matrix.Mask {
	mask.IDs = nil
	switch {
	case j == e.rank:
		mask.IDs = e.ownIDs
	case e.sparse != nil:
		mask.IDs = e.sparse.ids[j]
	case e.allIDs != nil:
		mask.IDs = e.allIDs[e.s.Offsets[j]:e.s.Offsets[j+1]]
	}
	mask.Row0 = int(e.s.Offsets[j])
	return mask
}

// exchangeSparse is aggregate for the sparsity-aware exchange: post the
// receives of every active root, send this rank's rows to the ranks that
// need them (if it is active), and multiply each block as it arrives.
func (e *Engine) exchangeSparse(x *exchange, out, own *matrix.Dense, active []bool, mask matrix.Mask) error {
	sp := e.sparse
	e.keepOwn(x, own, active)
	start := time.Now()
	var sent, recvd int64
	recvs := make([]collectives.Request, e.P)
	var sends []collectives.Request
	fail := func(err error) error {
		for _, r := range recvs {
			if r != nil {
				r.Wait()
			}
		}
		for _, s := range sends {
			s.Wait()
		}
		return fmt.Errorf("%s: sparse exchange: %w", x.name, err)
	}
	for j := range recvs {
		if j != e.rank && active[j] && len(x.bufs[j]) > 0 {
			r, err := e.c.Irecv(x.bufs[j], j, tagSparse)
			if err != nil {
				return fail(err)
			}
			recvs[j] = r
			recvd += int64(len(x.bufs[j])) * 4
		}
	}
	if active[e.rank] {
		w := x.width
		for i, idx := range sp.sendIdx {
			if i == e.rank || len(idx) == 0 {
				continue
			}
			buf := x.sendBufs[i][:len(idx)*w]
			for k, r := range idx {
				copy(buf[k*w:(k+1)*w], x.bufs[e.rank][int(r)*w:(int(r)+1)*w])
			}
			s, err := e.c.Isend(buf, i, tagSparse)
			if err != nil {
				return fail(err)
			}
			sends = append(sends, s)
			sent += int64(len(buf)) * 4
		}
	}
	first := true
	for j := 0; j < e.P; j++ {
		if recvs[j] != nil {
			t := time.Now()
			err := recvs[j].Wait()
			recvs[j] = nil
			e.clock.wait += time.Since(t)
			if err != nil {
				return fail(err)
			}
			e.be.Upload(x.dev[j])
		}
		blk := e.block(j)
		if blk.NNZ() == 0 {
			continue
		}
		if err := e.multiplyBlock(x, out, own, j, mask, !first); err != nil {
			return fail(err)
		}
		first = false
	}
	if first {
		e.be.Zero(out)
	}
	for _, s := range sends {
		t := time.Now()
		if err := s.Wait(); err != nil {
			return fmt.Errorf("%s: sparse exchange: %w", x.name, err)
		}
		e.clock.wait += time.Since(t)
	}
	d := time.Since(start)
	e.clock.comm += d
	e.c.Stats().Add("sparse_exchange", sent, recvd, d)
	return nil
}

// gatherIDs gives every rank all node ids (dense broadcasts of a reordered
// graph: each rank masks every block).
func (e *Engine) gatherIDs() error {
	mine := make([]float32, e.rows)
	for r := range mine {
		mine[r] = math.Float32frombits(uint32(e.ownID(r)))
	}
	all := make([]float32, e.s.N)
	counts := make([]int, e.P)
	for j := range counts {
		counts[j] = e.s.RowsOf(j)
	}
	if err := e.c.Allgatherv(mine, all, counts); err != nil {
		return fmt.Errorf("gathering node ids: %w", err)
	}
	e.allIDs = make([]int64, len(all))
	for i, v := range all {
		e.allIDs[i] = int64(math.Float32bits(v))
	}
	return nil
}

package train

// Cluster-batch training (GraphTheta, Cluster-GCN). prepare --clusters
// cuts the graph into K clusters and keeps each row's cluster in the
// shards. Every epoch is a pass over all clusters in a random order drawn
// from (seed, epoch) — the same on every rank — c clusters per step; each
// step runs forward, backward and the update on the subgraph its clusters
// induce. Restricting Â to the batch only changes the blocks every layer
// multiplies: the caches' blocks are swapped for the step's, rows outside
// the batch get empty rows, and only the batch's rows travel. Evaluation
// stays full-graph.
//
// The batch adjacency is renormalized on the induced subgraph, as
// Cluster-GCN does: Â_B = D_B^-1/2 (A_B + I) D_B^-1/2 with D_B the degrees
// within the batch (GraphSAGE: the mean over batch neighbours; GAT: its
// softmax over them). A row's batch degree is known to its owner, which
// sends the degrees of the rows others hold with one small all-to-all.
//
// With --boundary a batch's rows also read their neighbours outside the
// batch, with the whole graph's normalization (each target sees its full
// neighbourhood). Those neighbours are not computed in the step: every
// rank reads them from its cache — the copy kept since the neighbour was
// last in a batch, as a stale root's block is read — and gradients do not
// flow into them (the backward blocks are the batch's alone).
//
// Steps are numbered epoch·steps + s; dropout masks, wire rounding and
// the staleness policies count steps as they count epochs in global-batch
// training.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
)

// batchState is what cluster-batch training keeps across steps.
type batchState struct {
	k, perStep, steps int
	held              [][]int32 // held[j]: the cluster of each row of root j this rank holds
	sendIdx           [][]int32 // the sparse exchange's rows to send, per rank (nil at P = 1)

	// This step's batch.
	in        []bool        // in[cluster]
	rowIn     []bool        // this rank's rows in the batch
	fwd, grad []*matrix.CSR // the blocks every layer multiplies
	invDeg    []float32     // GraphSAGE: 1/(batch neighbours)
	train     []int32       // this rank's training rows in the batch
	globalN   int           // training rows in the batch over all ranks
	send      [][]int32     // send[i]: this rank's rows rank i needs and the batch holds
	recv      [][]int32     // recv[j]: positions of the held rows of root j in the batch
	fullInput kernels.Input // layer 1's whole operand, for evaluation
}

// setupBatches prepares cluster-batch training: the clusters of the rows
// held from every root (one all-to-all at start-up).
func (e *Engine) setupBatches(sendIdx [][]int32) error {
	s := e.s
	switch {
	case s.Clusters == nil:
		return fmt.Errorf("--batch clusters: the shards have no clusters: prepare them with --clusters K")
	case e.plan.Batch.ClustersPerStep < 1 || e.plan.Batch.ClustersPerStep > s.NumClusters:
		return fmt.Errorf("--clusters-per-step must be in 1..%d (the shards' clusters), got %d", s.NumClusters, e.plan.Batch.ClustersPerStep)
	case e.P > 1 && sendIdx == nil:
		return fmt.Errorf("--batch clusters moves only the batch's rows: it needs the sparse exchange (not --dense-bcast or --device-comm)")
	case e.plan.Wire.Delta || e.plan.Wire.CacheBits:
		return fmt.Errorf("--batch clusters sends part of a block: not with --wire-delta or --cache-bits, which keep whole copies")
	}
	b := &batchState{k: s.NumClusters, perStep: e.plan.Batch.ClustersPerStep, sendIdx: sendIdx, held: make([][]int32, e.P)}
	b.steps = (b.k + b.perStep - 1) / b.perStep
	b.held[e.rank] = s.Clusters
	if e.P > 1 {
		out, counts := []int32{}, make([]int, e.P)
		for i, idx := range sendIdx {
			for _, r := range idx {
				out = append(out, s.Clusters[r])
			}
			counts[i] = len(idx)
		}
		in := make([]int32, sum(e.view.rows)-e.view.rows[e.rank])
		recvCounts := make([]int, e.P)
		for j, n := range e.view.rows {
			if j != e.rank {
				recvCounts[j] = n
			}
		}
		if err := collectives.Alltoallv(e.c, out, counts, in, recvCounts); err != nil {
			return fmt.Errorf("cluster-batch set-up: %w", err)
		}
		off := 0
		for j, n := range recvCounts {
			if j != e.rank {
				b.held[j] = in[off : off+n]
				off += n
			}
		}
	}
	e.batch = b
	return nil
}

// batchClusters lists the clusters of each step of an epoch: a permutation
// of all clusters drawn from (seed, epoch), cut into steps (or the
// configured script).
func (e *Engine) batchClusters(epoch int) [][]int {
	if e.plan.Batch.Script != nil {
		return e.plan.Batch.Script(epoch)
	}
	b := e.batch
	perm := rand.New(rand.NewPCG(e.plan.Optim.Seed, 0xc1a55+uint64(epoch))).Perm(b.k)
	var out [][]int
	for lo := 0; lo < b.k; lo += b.perStep {
		out = append(out, perm[lo:min(lo+b.perStep, b.k)])
	}
	return out
}

// enterBatch makes clusters this step's batch: blocks restricted and
// renormalized, the training rows in it, and which rows travel.
func (e *Engine) enterBatch(clusters []int) error {
	b, s := e.batch, e.s
	b.in = make([]bool, b.k)
	for _, c := range clusters {
		if c < 0 || c >= b.k {
			return fmt.Errorf("batch cluster %d outside 0..%d", c, b.k-1)
		}
		b.in[c] = true
	}
	b.rowIn = make([]bool, e.rows())
	for r, c := range s.Clusters {
		b.rowIn[r] = b.in[c]
	}
	e.batchTraffic()
	b.fwd, b.grad = make([]*matrix.CSR, e.P), make([]*matrix.CSR, e.P)
	if e.plan.Batch.Boundary { // the whole graph's normalization: nothing to exchange
		b.invDeg = e.part.sage.invDeg
		for j, blk := range e.view.blocks {
			b.fwd[j], b.grad[j] = e.boundaryBlocks(blk, j)
		}
		return e.batchRows()
	}
	// Batch degrees of this rank's rows (neighbours in the batch plus the
	// self loop), then of every held row, from their owners.
	deg := make([]float32, e.rows())
	for j, blk := range e.view.blocks {
		held := b.held[j]
		for r := range e.rows() {
			if !b.rowIn[r] {
				continue
			}
			for p := blk.RowPtr[r]; p < blk.RowPtr[r+1]; p++ {
				if b.in[held[blk.ColIdx[p]]] {
					deg[r]++
				}
			}
		}
	}
	degOf, err := e.heldValues(deg)
	if err != nil {
		return err
	}
	b.invDeg = make([]float32, e.rows())
	for r, d := range deg {
		if d > 1 {
			b.invDeg[r] = 1 / (d - 1)
		}
	}
	for j, blk := range e.view.blocks {
		b.fwd[j], b.grad[j] = e.batchBlock(blk, j, deg, degOf[j])
	}
	return e.batchRows()
}

// batchTraffic is what travels in a batch: the held rows in it, both
// ways.
func (e *Engine) batchTraffic() {
	b := e.batch
	b.send, b.recv = make([][]int32, e.P), make([][]int32, e.P)
	for i, idx := range b.sendIdx {
		for _, r := range idx {
			if b.rowIn[r] {
				b.send[i] = append(b.send[i], r)
			}
		}
	}
	for j, held := range b.held {
		for k, c := range held {
			if j != e.rank && b.in[c] {
				b.recv[j] = append(b.recv[j], int32(k))
			}
		}
	}
}

// batchRows finishes a batch: its training rows, the rows that travel,
// and the blocks every layer multiplies.
func (e *Engine) batchRows() error {
	b := e.batch
	b.train = b.train[:0]
	for _, r := range e.s.Train {
		if b.rowIn[r] {
			b.train = append(b.train, r)
		}
	}
	counts, err := collectives.Allgather(e.c, []int64{int64(len(b.train))})
	if err != nil {
		return fmt.Errorf("batch size: %w", err)
	}
	b.globalN = int(sum(counts))
	for _, L := range e.layers {
		if c := L.base().fwd; c != nil {
			c.blocks, L.base().grad.blocks = b.fwd, b.grad
		}
	}
	// Layer 1 reads the batch's rows of X alone (the same row numbering, so
	// the same dropout masks): dropout and X·W cost the batch, not the graph.
	if b.fullInput == nil {
		b.fullInput = e.input
	}
	in, err := e.be.Input(kernels.NewOperand(e.s.Features.Keep(b.rowIn, nil)))
	if err != nil {
		return fmt.Errorf("batch input: %w", err)
	}
	e.input = in
	return nil
}

// stepping reports whether a cluster batch is in force (b may be nil:
// global-batch training).
func (b *batchState) stepping() bool { return b != nil && b.fwd != nil }

// leaveBatch puts the full blocks back (evaluation is full-graph).
func (e *Engine) leaveBatch() {
	e.batch.fwd = nil
	if e.batch.fullInput != nil {
		e.input = e.batch.fullInput
	}
	for _, L := range e.layers {
		if c := L.base(); c.fwd != nil {
			c.fwd.blocks, c.grad.blocks = c.fwd.full, c.grad.full
		}
	}
}

// batchBlock restricts root j's block to the batch's rows and columns:
// for a GCN Â_B's values from the batch degrees of row (deg) and column
// (degCol); GraphSAGE's mean and pattern without the self loop; GAT's
// pattern with it.
func (e *Engine) batchBlock(blk *matrix.CSR, j int, deg, degCol []float32) (fwd, grad *matrix.CSR) {
	b := e.batch
	held := b.held[j]
	sage := e.plan.Model.Arch.HasRoot()
	f := &matrix.CSR{Rows: blk.Rows, Cols: blk.Cols, RowPtr: make([]int64, blk.Rows+1)}
	var g *matrix.CSR
	if sage {
		g = &matrix.CSR{Rows: blk.Rows, Cols: blk.Cols, RowPtr: make([]int64, blk.Rows+1)}
	}
	for r := range blk.Rows {
		if b.rowIn[r] {
			for p := blk.RowPtr[r]; p < blk.RowPtr[r+1]; p++ {
				col := blk.ColIdx[p]
				if !b.in[held[col]] {
					continue
				}
				self := j == e.rank && int(col) == r
				switch {
				case sage && self:
					continue
				case sage:
					f.ColIdx, f.Val = append(f.ColIdx, col), append(f.Val, b.invDeg[r])
					g.ColIdx, g.Val = append(g.ColIdx, col), append(g.Val, 1)
				case e.plan.Model.Arch.Attends():
					f.ColIdx, f.Val = append(f.ColIdx, col), append(f.Val, 1)
				default:
					v := float32(1 / math.Sqrt(float64(deg[r])*float64(degCol[col])))
					f.ColIdx, f.Val = append(f.ColIdx, col), append(f.Val, v)
				}
			}
		}
		f.RowPtr[r+1] = int64(len(f.ColIdx))
		if sage {
			g.RowPtr[r+1] = int64(len(g.ColIdx))
		}
	}
	if !sage {
		return f, f
	}
	return f, g
}

// boundaryBlocks restricts root j's block to the batch's rows, keeping
// every neighbour and the whole graph's values (GraphSAGE: its mean; GAT:
// the pattern) forward, and only the batch's columns backward.
func (e *Engine) boundaryBlocks(blk *matrix.CSR, j int) (fwd, grad *matrix.CSR) {
	b := e.batch
	held := b.held[j]
	fv, gv := blk.Val, blk.Val
	switch {
	case e.plan.Model.Arch.HasRoot():
		fv, gv = e.part.sage.mean[j].Val, e.part.sage.adj[j].Val
	case e.plan.Model.Arch.Attends():
		fv = make([]float32, len(blk.Val))
		for i := range fv {
			fv[i] = 1
		}
		gv = fv
	}
	f := &matrix.CSR{Rows: blk.Rows, Cols: blk.Cols, RowPtr: make([]int64, blk.Rows+1)}
	g := &matrix.CSR{Rows: blk.Rows, Cols: blk.Cols, RowPtr: make([]int64, blk.Rows+1)}
	for r := range blk.Rows {
		if b.rowIn[r] {
			for p := blk.RowPtr[r]; p < blk.RowPtr[r+1]; p++ {
				col := blk.ColIdx[p]
				if fv[p] != 0 {
					f.ColIdx, f.Val = append(f.ColIdx, col), append(f.Val, fv[p])
				}
				if gv[p] != 0 && b.in[held[col]] {
					g.ColIdx, g.Val = append(g.ColIdx, col), append(g.Val, gv[p])
				}
			}
		}
		f.RowPtr[r+1], g.RowPtr[r+1] = int64(len(f.ColIdx)), int64(len(g.ColIdx))
	}
	return f, g
}

// heldValues gives, for every root j, its value of each row this rank
// holds that the batch holds (this rank's own: vals itself): one small
// all-to-all of the batch's rows.
func (e *Engine) heldValues(vals []float32) ([][]float32, error) {
	b := e.batch
	out := make([][]float32, e.P)
	out[e.rank] = vals
	if e.P == 1 {
		return out, nil
	}
	var send []float32
	counts, recvCounts := make([]int, e.P), make([]int, e.P)
	for i, rows := range b.send {
		for _, r := range rows {
			send = append(send, vals[r])
		}
		counts[i] = len(rows)
	}
	for j, pos := range b.recv {
		recvCounts[j] = len(pos)
	}
	in := make([]float32, sum(recvCounts))
	start := time.Now()
	if err := collectives.Alltoallv(e.c, send, counts, in, recvCounts); err != nil {
		return nil, fmt.Errorf("batch degrees: %w", err)
	}
	e.c.Stats().Add("batch_degrees", 4*int64(len(send)), 4*int64(len(in)), time.Since(start))
	off := 0
	for j, pos := range b.recv {
		if j == e.rank {
			continue
		}
		out[j] = make([]float32, e.view.rows[j])
		for _, p := range pos {
			out[j][p] = in[off]
			off++
		}
	}
	return out, nil
}

// batchEpoch trains one epoch of cluster-batch steps and returns the
// epoch's summed training loss (every training node counts once).
func (e *Engine) batchEpoch(ep int) (float64, error) {
	defer e.leaveBatch()
	steps := e.batchClusters(ep)
	if len(steps) > e.batch.steps {
		return 0, fmt.Errorf("epoch %d has %d batches, at most %d fit", ep+1, len(steps), e.batch.steps)
	}
	var lossSum float64
	for s, clusters := range steps {
		if err := e.enterBatch(clusters); err != nil {
			return lossSum, err
		}
		if e.batch.globalN == 0 { // no training node: nothing to learn (Adam would still move)
			continue
		}
		l, err := e.trainStep(e.stepID(ep, s))
		lossSum += l
		if d, ok := err.(*divergence); ok {
			d.epoch = ep + 1
		}
		if err != nil {
			return lossSum, err
		}
	}
	return lossSum, nil
}

// trainRows are the rows the loss covers and the count it is averaged over.
func (e *Engine) trainRows() ([]int32, int) {
	if e.batch.stepping() {
		return e.batch.train, e.batch.globalN
	}
	return e.s.Train, e.s.GlobalTrain
}

// stepID numbers step s of epoch ep (the epoch itself in global-batch
// training).
func (e *Engine) stepID(ep, s int) int {
	if e.batch == nil {
		return ep
	}
	return ep*e.batch.steps + s
}

// steps lists the step ids of epoch ep.
func (e *Engine) steps(ep int) []int {
	if e.batch == nil {
		return []int{ep}
	}
	out := make([]int, e.batch.steps)
	for s := range out {
		out[s] = e.stepID(ep, s)
	}
	return out
}

// copyBatchRows copies the rows of src in this step's batch into dst (all
// of them outside cluster-batch training): the rows a cached copy of this
// rank's block refreshes, the others keeping what was last sent.
func (e *Engine) copyBatchRows(dst, src []float32, width int) {
	if !e.batch.stepping() {
		copy(dst, src)
		return
	}
	for r, in := range e.batch.rowIn {
		if in {
			copy(dst[r*width:(r+1)*width], src[r*width:(r+1)*width])
		}
	}
}

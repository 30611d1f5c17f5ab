package train

// SANCUS Algorithm 3 on rank i, one layer at a time. Everything that decides
// whether a block travels lives in this file:
//
//   forward, layer l:
//     decide ACTIVE/STALE for every root j            (staleness policy)
//     for each root j in ring order:
//       ACTIVE: ring-broadcast B_j, cache it under (l, j)
//       STALE:  nothing is sent; every rank uses its cached B̃_j
//       T_i += Â_ij · B_j            (while block j+1 is still on the wire)
//
//   backward, layer l: the gradient blocks travel the same way but are never
//   skipped (skipping them is the SkipG baseline, behind its own flag).
//
// B_j is H_j (aggregate first, when the layer's input is the narrower side)
// or (HW)_j (transform first): the engine always sends the narrower one.

import (
	"fmt"
	"math"
	"time"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/staleness"
)

// exchange is one kind of block traffic of one layer (forward embeddings,
// or backward gradients): the P block buffers double as the cache of
// historical copies, and last[j] is the epoch root j last broadcast.
type exchange struct {
	name     string
	width    int
	bufs     [][]float32     // bufs[j]: root j's block, rows_j × width (host side)
	dev      []*matrix.Dense // the same blocks where the backend computes: the cache
	last     []int           // -1: never broadcast, no cached copy
	policy   staleness.Policy
	log      [][]int       // epochs in which each root broadcast (SANCUS Figure 24)
	scratch  *matrix.Dense // one masked block at a time
	ref      []float32     // transform-first: this rank's raw H·W when it last broadcast
	sendBufs [][]float32   // sparse exchange: the rows packed for each rank
}

func (e *Engine) newExchange(name string, width int, p staleness.Policy) *exchange {
	x := &exchange{name: name, width: width, policy: p, bufs: make([][]float32, e.P), dev: make([]*matrix.Dense, e.P),
		last: make([]int, e.P), log: make([][]int, e.P)}
	most := 0
	for j := range x.bufs {
		x.bufs[j] = make([]float32, e.rowsOf(j)*width)
		x.dev[j] = e.be.Mirror(x.bufs[j], e.rowsOf(j), width)
		x.last[j] = -1
		most = max(most, e.rowsOf(j))
	}
	x.scratch = e.be.NewDense(most, width)
	if e.sparse != nil {
		x.sendBufs = make([][]float32, e.P)
		for i, idx := range e.sparse.sendIdx {
			x.sendBufs[i] = make([]float32, len(idx)*width)
		}
	}
	return x
}

// relDrift is ‖cur − ref‖_F / ‖ref‖_F, SANCUS's variation gap (∞ without a
// reference, which forces a broadcast).
func relDrift(cur, ref []float32) float64 {
	n := kernels.FrobNorm(ref)
	if len(ref) == 0 || n == 0 {
		return math.Inf(1)
	}
	return kernels.FrobDiff(cur, ref) / n
}

// decide returns which roots broadcast this epoch (identical on every rank)
// and records the new versions. drift measures this rank's own block
// against its last broadcast copy; only variation-gap calls it.
func (e *Engine) decide(x *exchange, epoch int, drift func() float64) ([]bool, error) {
	active := make([]bool, e.P)
	in := staleness.Input{
		Epoch:   epoch,
		Rank:    e.rank,
		Last:    x.last,
		Depends: e.depends,
		Drift:   drift,
		Gather: func(mine float32) ([]float32, error) {
			out := make([]float32, e.P)
			err := collectives.AllgatherFlags(e.c, mine, out)
			return out, err
		},
	}
	if err := x.policy.Active(in, active); err != nil {
		return nil, err
	}
	for j, a := range active {
		if a {
			x.last[j] = epoch
			x.log[j] = append(x.log[j], epoch)
		}
	}
	return active, nil
}

// aggregate computes out = Σ_j Â_ij · (M_j ⊙ B_j). Roots marked active
// broadcast their block (this rank's own block is copied into the shared
// buffer first, so the copy everyone caches is the copy this rank uses too);
// the others are read from the cache. A goroutine drives the broadcasts while
// this one multiplies each block as soon as it is usable.
//
// mask, when set, is dropout applied here, by the receiver, with the rows'
// global ids: the same mask the owner would apply, so caches hold raw
// embeddings and a stale copy still gets this epoch's dropout.
func (e *Engine) aggregate(x *exchange, out, own *matrix.Dense, active []bool, mask matrix.Mask) error {
	if e.sparse != nil {
		return e.exchangeSparse(x, out, own, active, mask) // sparse.go: only the rows each rank uses
	}
	if e.blocks != nil {
		return e.exchangeBlocks(x, out, own, active, mask)
	}
	e.keepOwn(x, own, active)
	ready := make(chan int, e.P)
	errc := make(chan error, 1)
	commStart := time.Now()
	go func() {
		errc <- collectives.SkipBcast(e.c, x.bufs, active, e.bcast, func(j int) { ready <- j })
		close(ready)
	}()
	first := true
	var err error
	for {
		waitStart := time.Now()
		j, ok := <-ready
		e.clock.wait += time.Since(waitStart)
		if !ok {
			break
		}
		if j != e.rank && active[j] {
			e.be.Upload(x.dev[j]) // a fresh copy arrived on the host
		}
		blk := e.block(j)
		if blk.NNZ() == 0 || err != nil {
			continue
		}
		if err = e.multiplyBlock(x, out, own, j, mask, !first); err != nil {
			err = fmt.Errorf("%s: block %d: %w", x.name, j, err)
		}
		first = false
	}
	e.clock.comm += time.Since(commStart)
	if first {
		e.be.Zero(out)
	}
	if cerr := <-errc; cerr != nil {
		return cerr
	}
	return err
}

// exchangeBlocks is aggregate over a BlockComm (NCCL): the active roots'
// blocks move where the backend keeps them, in one group, and then every
// block is multiplied. Transfers are queued on the device with the kernels,
// so their time shows as compute, not as a wait.
func (e *Engine) exchangeBlocks(x *exchange, out, own *matrix.Dense, active []bool, mask matrix.Mask) error {
	if active[e.rank] {
		e.be.Copy(x.dev[e.rank], own)
	}
	start := time.Now()
	if err := e.blocks.SkipBcast(x.dev, active); err != nil {
		return fmt.Errorf("%s: %s skip-broadcast: %w", x.name, e.blocks.Name(), err)
	}
	d := time.Since(start)
	e.clock.comm += d
	if e.blocks.Name() != "host" { // the host path counts its own bytes
		var sent, recvd int64
		for j, a := range active {
			switch {
			case !a:
			case j == e.rank:
				sent += int64(len(x.bufs[j])) * 4 // the root's copy into the ring
			default:
				recvd += int64(len(x.bufs[j])) * 4
			}
		}
		e.c.Stats().Add(e.blocks.Name()+"_skip_bcast", sent, recvd, d)
	}
	first := true
	for j := 0; j < e.P; j++ {
		if e.block(j).NNZ() == 0 {
			continue
		}
		if err := e.multiplyBlock(x, out, own, j, mask, !first); err != nil {
			return fmt.Errorf("%s: block %d: %w", x.name, j, err)
		}
		first = false
	}
	if first {
		e.be.Zero(out)
	}
	return nil
}

// multiplyBlock adds (or writes, first time) Â_ij · (M_j ⊙ B_j) into out,
// B_j being root j's buffer (or this rank's fresh rows with FreshDiagonal).
func (e *Engine) multiplyBlock(x *exchange, out, own *matrix.Dense, j int, mask matrix.Mask, accumulate bool) error {
	b := x.dev[j]
	if j == e.rank && e.cfg.FreshDiagonal {
		b = own
	}
	if mask.P > 0 {
		masked := x.scratch.Prefix(b.Rows)
		e.be.Dropout(e.maskFor(mask, j), masked, b)
		b = masked
	}
	return e.be.SpMM(out, e.block(j), b, accumulate)
}

// keepOwn puts this rank's block, when it is active, into the cache slot
// that every rank uses for it, and onto the host for the transport.
func (e *Engine) keepOwn(x *exchange, own *matrix.Dense, active []bool) {
	if active[e.rank] {
		e.be.Copy(x.dev[e.rank], own)
		e.be.Download(x.dev[e.rank])
	}
}

// clip scales δ_i to norm th_i = ClipScale·Clip when it is larger, before
// the block is broadcast (SANCUS's per-rank gradient clipping).
func (e *Engine) clip(d *matrix.Dense) {
	if e.cfg.Clip <= 0 {
		return
	}
	th := e.clipScale * e.cfg.Clip
	if n := e.be.Norm(d); n > th {
		e.be.Scale(d, float32(th/n))
		e.clipped++
	}
}

// exchangeGradient broadcasts gradient blocks — all of them, unless the
// SkipG baseline lets its policy skip some — and aggregates them.
func (e *Engine) exchangeGradient(x *exchange, epoch int, out, own *matrix.Dense) error {
	active, err := e.decide(x, epoch, func() float64 { return relDrift(e.host(own), x.bufs[e.rank]) })
	if err != nil {
		return err
	}
	return e.aggregate(x, out, own, active, matrix.Mask{})
}

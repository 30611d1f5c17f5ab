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
	"sancus/src/staleness"
)

// exchange is one kind of block traffic of one layer (forward embeddings,
// or backward gradients): the P block buffers double as the cache of
// historical copies, and Last[j] is the epoch root j last broadcast.
type exchange struct {
	name   string
	width  int
	bufs   [][]float32 // bufs[j]: root j's block, rows_j × width
	last   []int       // -1: never broadcast, no cached copy
	policy staleness.Policy
	log    [][]int // epochs in which each root broadcast (SANCUS Figure 24)
}

func (e *Engine) newExchange(name string, width int, p staleness.Policy) *exchange {
	x := &exchange{name: name, width: width, policy: p, bufs: make([][]float32, e.P), last: make([]int, e.P), log: make([][]int, e.P)}
	for j := range x.bufs {
		x.bufs[j] = make([]float32, e.s.RowsOf(j)*width)
		x.last[j] = -1
	}
	return x
}

// decide returns which roots broadcast this epoch. own is this rank's fresh
// block, compared against its last broadcast copy by variation-gap.
func (e *Engine) decide(x *exchange, epoch int, own *kernels.Dense) ([]bool, error) {
	active := make([]bool, e.P)
	in := staleness.Input{
		Epoch:   epoch,
		Rank:    e.rank,
		Last:    x.last,
		Depends: e.depends,
		Drift: func() float64 {
			cached := x.bufs[e.rank]
			n := kernels.FrobNorm(cached)
			if n == 0 {
				return math.Inf(1)
			}
			return kernels.FrobDiff(own.Data, cached) / n
		},
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

// aggregate computes out = Σ_j Â_ij · B_j. Roots marked active broadcast
// their block (this rank's own block is copied into the shared buffer first,
// so the copy everyone caches is the copy this rank uses too); the others
// are read from the cache. A goroutine drives the broadcasts while this one
// multiplies each block as soon as it is usable.
func (e *Engine) aggregate(x *exchange, out, own *kernels.Dense, active []bool) error {
	if active[e.rank] {
		copy(x.bufs[e.rank], own.Data)
	}
	ready := make(chan int, e.P)
	errc := make(chan error, 1)
	commStart := time.Now()
	go func() {
		errc <- collectives.SkipBcast(e.c, x.bufs, active, e.bcast, func(j int) { ready <- j })
		close(ready)
	}()
	first := true
	for {
		waitStart := time.Now()
		j, ok := <-ready
		e.clock.wait += time.Since(waitStart)
		if !ok {
			break
		}
		blk := e.s.Blocks[j]
		if blk.NNZ() == 0 {
			continue
		}
		b := &kernels.Dense{Rows: e.s.RowsOf(j), Cols: x.width, Data: x.bufs[j]}
		if j == e.rank && e.cfg.FreshDiagonal {
			b = own
		}
		if err := kernels.SpMM(out, blk, b, !first); err != nil {
			return fmt.Errorf("%s: block %d: %w", x.name, j, err)
		}
		first = false
	}
	e.clock.comm += time.Since(commStart)
	if first {
		out.Zero()
	}
	return <-errc
}

// clip scales δ_i to norm th_i = ClipScale·Clip when it is larger, before
// the block is broadcast (SANCUS's per-rank gradient clipping).
func (e *Engine) clip(d *kernels.Dense) {
	if e.cfg.Clip <= 0 {
		return
	}
	th := e.clipScale * e.cfg.Clip
	if n := kernels.FrobNorm(d.Data); n > th {
		kernels.Scale(d.Data, float32(th/n))
		e.clipped++
	}
}

package train

// SANCUS Algorithm 3 on rank i. Every layer that communicates computes
//
//	out_i = Σ_j Â_ij · B_j
//
// where B_j is root j's block: H_j when the layer aggregates first (its
// input is the narrower side) or (HW)_j when it transforms first (layers.go
// picks whichever is narrower); the backward pass moves gradient blocks the
// same way. aggregate is the whole algorithm for one such product:
//
//	decide    the staleness policy marks each root ACTIVE or STALE, the same
//	          on every rank: from versions and sparsity every rank knows, or,
//	          for variation-gap, from the owners' votes on their own drift,
//	          gathered here. This is the one place a broadcast is skipped.
//	exchange  the exchanger moves the active roots' blocks into every rank's
//	          cache. By default (sparse.go) an active root sends each rank
//	          only the rows that rank's Â_ij references, point to point;
//	          --dense-bcast sends whole blocks around a pipelined ring and
//	          --device-comm through NCCL (exchange.go). A stale root sends
//	          nothing, and every rank multiplies its cached copy.
//	multiply  out_i += Â_ij · M(B_j) for each root as soon as its block is
//	          usable, while later blocks are still on the wire (shallow peer
//	          blocks as soon as their merged run's last is: merge.go). M is this
//	          epoch's dropout, applied by the receiver with the rows' original
//	          ids, so caches hold raw embeddings and a stale copy still gets
//	          this epoch's mask; where no root can be stale, the sender
//	          applies it as it packs or encodes its rows instead
//	          (senderMask, route.encodesDropped), or layer 1 as it writes
//	          them (nextDrops).
//
// Gradient blocks never skip (their policy is None) unless --skip-gradients
// runs the SkipG baseline; evaluation passes use caches of their own that
// are always fresh.

import (
	"fmt"
	"math"
	"time"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/staleness"
)

// aggregate computes out = Σ_j Â_ij · M(B_j) through cache c, own.rows
// being this rank's block B_i. ref is what variation-gap measures this
// rank's drift on (nil: own.rows itself); it is read only when c's policy
// needs drift.
func (e *Engine) aggregate(c *cache, epoch int, out *matrix.Dense, own ownRows, ref *matrix.Dense, mask matrix.Mask) error {
	if mask.P > 0 && c.route.encodesDropped { // every block arrives dropped
		switch {
		case own.dropped == nil && e.dropsAsEncoded(c): // a block of rows at a time, as encoded (wire.go)
			c.wire.drop = e.maskFor(mask, c, e.rank)
		case own.dropped == nil:
			own.dropped = c.maskScratch(e.be, own.rows.Rows)
			e.be.Dropout(e.maskFor(mask, c, e.rank), own.dropped, own.rows)
			fallthrough
		default:
			own.rows, own.dropped = own.dropped, nil
		}
		mask = matrix.Mask{}
	}
	own.send = e.senderMask(c, mask)
	first := true
	// A block masked by this rank, root by root, is not merged in a run.
	runs := c.merging(mask.P > 0 && own.send.P == 0)
	err := e.communicate(c, epoch, &own, ref, func(j int) error {
		if j == e.rank && own.meanwhile != nil {
			if err := own.meanwhile(); err != nil {
				return err
			}
			if own.into {
				first = false
			}
		}
		if own.into && first {
			return fmt.Errorf("%s: block %d came before this rank's own, whose term the blocks sum into", c.name, j)
		}
		if runs && j != e.rank {
			run := c.merge.runDone(j)
			if run == nil || run.block.NNZ() == 0 { // (waits for the run's last block)
				return nil
			}
			err := e.product(c, out, run.block, c.merge.slab, run.occ, !first)
			first = false
			return err
		}
		if c.blocks[j].NNZ() == 0 {
			return nil
		}
		err := e.multiply(c, out, &own, j, mask, !first)
		first = false
		return err
	})
	if err == nil && runs {
		err = c.merge.done()
	}
	if err == nil && first { // no block has entries
		e.be.Zero(out)
	}
	return err
}

// communicate is Algorithm 3 around use: decide which roots send, move
// their blocks into c (everyone caches the copy this rank uses too), and
// call use(j) for every root j as soon as its block is usable.
func (e *Engine) communicate(c *cache, epoch int, own *ownRows, ref *matrix.Dense, use func(j int) error) error {
	if c.quantized() {
		c.wire.prepare(c.last) // before decide records this epoch's versions
	}
	active, err := e.decide(c, epoch, orRaw(ref, own.rows))
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	if !e.ownFresh(c, active) { // the product reads the stale copy, undropped
		own.dropped = nil
	}
	switch {
	case c.route.own == ownEncoded:
		if err := e.encodeOwn(c, epoch, e.host(own.rows), active); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	case !active[e.rank], c.route.own == ownInPlace: // multiply reads own.rows itself
	case c.route.own == ownBatchRows:
		e.copyBatchRows(c.host[e.rank], e.host(own.rows), c.width)
		e.be.Upload(c.dev[e.rank])
	default:
		e.be.Copy(c.dev[e.rank], own.rows)
	}
	start := time.Now()
	wait, err := e.net.x.exchange(c, own, active, use)
	e.tally.clock.wait += wait
	e.tally.clock.comm += time.Since(start)
	if err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	return nil
}

// decide returns which roots broadcast this epoch, identical on every rank,
// and records their new versions. A policy that needs drift gets this
// rank's vote on ref against the copy it last broadcast, and every rank's
// vote through one small allgather.
func (e *Engine) decide(c *cache, epoch int, ref *matrix.Dense) ([]bool, error) {
	in := staleness.Input{Epoch: epoch, Rank: e.rank, Last: c.last, Depends: e.part.depends}
	var cur []float32
	if c.policy.NeedsDrift() {
		cur = e.host(ref)
		votes := make([]byte, e.P)
		if err := collectives.AllgatherFlags(e.c, boolByte(c.policy.Vote(in, relDrift(cur, c.ref))), votes); err != nil {
			return nil, err
		}
		in.Votes = make([]bool, e.P)
		for j, v := range votes {
			in.Votes[j] = v != 0
		}
	}
	active := make([]bool, e.P)
	c.policy.Active(in, active)
	for j, a := range active {
		if a {
			c.last[j] = epoch
			c.log[j] = append(c.log[j], epoch)
		}
	}
	if cur != nil && active[e.rank] {
		c.ref = append(c.ref[:0], cur...)
	}
	return active, nil
}

// ownBlock is root j's rows as a product reads them: its slot, or this
// rank's rows themselves (own) where the route reads them in place.
func (e *Engine) ownBlock(c *cache, j int, own *matrix.Dense) *matrix.Dense {
	if j == e.rank && c.route.direct {
		return own
	}
	return c.block(e.be, j)
}

// multiply adds (or writes, the first time) Â_ij · M(B_j) into out, B_j
// being root j's cached block (with --fresh-diagonal, this rank's own fresh
// rows instead of the shared copy).
func (e *Engine) multiply(c *cache, out *matrix.Dense, own *ownRows, j int, mask matrix.Mask, accumulate bool) error {
	fresh := j == e.rank && (e.plan.Staleness.FreshDiagonal || own.dropped != nil)
	if masked := mask.P > 0 && (j == e.rank || own.send.P == 0); !fresh && c.inRanges(e.be, j, masked) {
		if !masked {
			mask = matrix.Mask{}
		}
		return e.multiplyInRanges(c, out, j, mask, accumulate)
	}
	b := own.rows
	if j != e.rank || !e.plan.Staleness.FreshDiagonal {
		b = e.ownBlock(c, j, own.rows)
	}
	if j == e.rank && own.dropped != nil { // the layer below dropped the rows as it wrote them
		b, mask = own.dropped, matrix.Mask{}
	}
	if mask.P > 0 && (j == e.rank || own.send.P == 0) { // else its sender dropped the rows
		m := e.maskFor(mask, c, j)
		masked := c.maskScratch(e.be, b.Rows)
		if c.read != nil { // the other rows are never read: left undrawn
			if err := e.out.rowOps.DropoutRows(m, masked, b, c.read[j]); err != nil {
				return fmt.Errorf("block %d: %w", j, err)
			}
		} else {
			e.be.Dropout(m, masked, b)
		}
		b = masked
	}
	if err := e.product(c, out, c.blocks[j], b, c.rowsOf(j), accumulate); err != nil {
		return fmt.Errorf("block %d: %w", j, err)
	}
	return nil
}

// product adds a · b to out (writes it, without accumulate): where it adds,
// at the rows occ lists, those a has entries in (an empty row adds
// nothing; none listed: every row); else at the rows the cache forms.
func (e *Engine) product(c *cache, out *matrix.Dense, a *matrix.CSR, b *matrix.Dense, occ kernels.OccupiedRows, accumulate bool) error {
	switch {
	case accumulate && occ.Rows != nil && c.addAt != nil:
		return c.addAt(out, a, b, occ)
	case c.outRows != nil:
		return e.out.rowOps.SpMMRows(out, a, b, c.outRows, accumulate)
	default:
		return e.be.SpMM(out, a, b, accumulate)
	}
}

// multiplyInRanges is multiply for a block kept packed, decoded a range
// of rows at a time (cache.productInRanges), at the rows multiply forms.
func (e *Engine) multiplyInRanges(c *cache, out *matrix.Dense, j int, mask matrix.Mask, accumulate bool) error {
	var rows []int32
	var ptr []int64
	switch occ := c.rowsOf(j); {
	case accumulate && occ.Rows != nil:
		rows, ptr = occ.Rows, occ.Ptr
	case c.outRows != nil:
		rows = c.outRows
	}
	if mask.P > 0 {
		mask = e.maskFor(mask, c, j)
	}
	if err := c.productInRanges(e.be, out, c.blocks[j], j, rows, ptr, mask, accumulate); err != nil {
		return fmt.Errorf("block %d: %w", j, err)
	}
	return nil
}

// clip scales δ_i to norm th_i = ClipScale·Clip when it is larger, before
// the block is exchanged (SANCUS's per-rank gradient clipping).
func (e *Engine) clip(d *matrix.Dense) {
	if e.plan.Optim.Clip <= 0 {
		return
	}
	th := e.plan.Optim.ClipScale * e.plan.Optim.Clip
	if n := e.be.Norm(d); n > th {
		e.be.Scale(d, float32(th/n))
		e.tally.clipped++
	}
}

// relDrift is ‖cur − ref‖_F / ‖ref‖_F, SANCUS's variation gap (∞ without a
// comparable reference, which forces a broadcast).
func relDrift(cur, ref []float32) float64 {
	n := kernels.FrobNorm(ref)
	if len(ref) == 0 || n == 0 || len(cur) != len(ref) { // (a checkpoint from before the drift sample)
		return math.Inf(1)
	}
	return kernels.FrobDiff(cur, ref) / n
}

func orRaw(d, fallback *matrix.Dense) *matrix.Dense {
	if d != nil {
		return d
	}
	return fallback
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

package train

import (
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/staleness"
)

// A route is how one cache's blocks are made, sent, dropped and
// multiplied, decided once at setup (routeCaches) from every feature that
// touches them: the exchange, the staleness policy, the wire, cluster
// batches and the rows the products read. aggregate and the exchangers
// follow it and re-derive none of it; a new feature adds its rule here.
type route struct {
	// own is how this rank's fresh block reaches its slot when it
	// broadcasts.
	own ownSource
	// direct: this rank multiplies its block (and the sparse exchange
	// packs it) straight from the layer's rows, not from a copy in its
	// slot: the copy would equal them (float32 rows, no root ever stale,
	// the whole graph) and no other rank reads the slot, or the exchange
	// packs from the rows anyway. It saves a copy of the block per product.
	direct bool
	// senderDrops: where the rows travel afresh every epoch as float32,
	// point to point, each row is dropped once, by its owner as it packs
	// it, and the receivers multiply what arrives, where each would
	// otherwise draw the same mask again (the draws are keyed by node id,
	// so the values are the ones the receivers would make). A cache that
	// can serve a stale copy holds raw rows, so the copy gets this epoch's
	// mask: there the receivers draw it.
	senderDrops bool
	// belowDrops: the layer below writes this rank's rows, at the rows
	// read, dropped as this layer drops them (nextDrops); the product and
	// the packing read that copy.
	belowDrops bool
	// encodesDropped: where a quantized cache's rows travel afresh every
	// epoch, its owner drops them before it encodes them, once a row, and
	// every rank multiplies the blocks as decoded, mask and all; receivers
	// would otherwise draw the mask on every block they hold, and the owner
	// on its own. Every exchange, at every P, encodes the same dropped rows.
	encodesDropped bool
}

// ownSource is where a broadcasting rank's slot gets its block from.
type ownSource uint8

const (
	ownCopied    ownSource = iota // copied from the layer's rows
	ownEncoded                    // encoded into the wire's bits; the slot holds them decoded (wire.go)
	ownBatchRows                  // the cluster batch's rows copied (batch.go)
	ownInPlace                    // not copied: the layer's rows are read where they are (direct)
)

// routeOf is every rule of how features combine on one cache.
func (e *Engine) routeOf(c *cache) route {
	_, never := c.policy.(staleness.None)
	_, sparse := e.net.x.(*sparseExchange)
	floats, whole := !c.quantized(), e.batch == nil
	// A GAT layer's attention reads its own slot as it reads the others'
	// (ownBlock), the rows themselves where direct.
	attends := e.plan.Model.Arch.Attends()
	r := route{
		direct:         (e.P == 1 || sparse) && never && floats && whole,
		senderDrops:    sparse && never && floats && whole,
		encodesDropped: !floats && never && whole && !c.wire.delta && !attends,
	}
	r.belowDrops = c.read != nil && whole && (floats || r.encodesDropped)
	switch {
	case !floats:
		r.own = ownEncoded
	case r.direct:
		r.own = ownInPlace
	case !whole:
		r.own = ownBatchRows
	}
	return r
}

// routeCaches fixes every cache's route, once the exchange, the batches
// and the rows read are known.
func (e *Engine) routeCaches() {
	seen := map[*matrix.CSR]kernels.OccupiedRows{}
	for _, l := range e.layers {
		_, attends := l.(*gatLayer) // its products are its own kernels' (gat.go)
		for _, c := range l.base().caches() {
			c.route = e.routeOf(c)
			if !attends {
				c.routeRows(e.be, seen)
			}
		}
	}
}

// mergeCaches merges every cache's peer blocks into runs where they are
// shallow (merge.go), once the slots are laid out.
func (e *Engine) mergeCaches() {
	if e.plan.Exchange.BlockByBlock {
		return
	}
	seen := map[runKey]mergedRun{}
	for _, l := range e.layers {
		if _, attends := l.(*gatLayer); attends {
			continue
		}
		for _, c := range l.base().caches() {
			c.mergeRuns(e.be, seen)
		}
	}
}

// ownRows is this rank's block in one product: the layer's rows, the copy
// the layer below dropped (nil: none, or the product reads a stale copy
// instead, see ownFresh) and the mask the exchange drops them with as it
// packs them (P = 0: none). meanwhile, when set, is the layer's work that
// reads no other rank's rows (GraphSAGE's root term): aggregate runs it
// when this rank's own block comes up, which the exchanges put first, so
// it computes while the other blocks are on the wire. into says meanwhile
// writes the product's output itself, and every block sums into it.
type ownRows struct {
	rows, dropped *matrix.Dense
	send          matrix.Mask
	meanwhile     func() error
	into          bool
}

// dropsAsPacked reports whether the exchange drops this rank's rows as it
// packs them, the layer below having made no dropped copy.
func (o *ownRows) dropsAsPacked() bool { return o.send.P > 0 && o.dropped == nil }

// senderMask is the mask the sparse exchange applies to the rows this
// rank sends, where the route says the sender drops them; else none.
func (e *Engine) senderMask(c *cache, mask matrix.Mask) matrix.Mask {
	if mask.P <= 0 || !c.route.senderDrops {
		return matrix.Mask{}
	}
	return e.maskFor(mask, c, e.rank)
}

// nextDrops is the mask layer 1 applies, as it writes its rows, to a copy
// of them for layer 2 at epoch's training pass, or none. Layer 2 would
// otherwise draw that mask on this rank's rows itself, up to three times:
// dropout's backward always; its own block's product where that reads the
// rows as they are now (ownFresh); senderMask's packing. The copy serves
// each: the product and the packing read it, and the backward keeps ∂H
// where it is positive. Layer 1 writes only the rows read (restrictInput),
// which is what the product and the packing read; ∂H is zero on the
// others, where the copy stays zero.
func (e *Engine) nextDrops(epoch int) matrix.Mask {
	if len(e.layers) != 2 {
		return matrix.Mask{}
	}
	next, ok := e.layers[1].(*aggregateLayer)
	if !ok {
		return matrix.Mask{}
	}
	c, mask := next.fwd, e.mask(epoch, 1, true)
	if mask.P <= 0 || c == nil || !c.route.belowDrops {
		return matrix.Mask{}
	}
	return e.maskFor(mask, c, e.rank)
}

// ownFresh reports whether the product under way reads this rank's rows
// as they are now: from the layer's rows themselves, or from a copy made
// this epoch.
func (e *Engine) ownFresh(c *cache, active []bool) bool {
	return c.route.direct || e.plan.Staleness.FreshDiagonal || active[e.rank]
}

package train

// Blocks on the wire in fewer bits (collectives/wire). When a cache's
// blocks travel quantized, the owner encodes its block once per exchange
// and keeps the decoded values as its own copy: it multiplies exactly what
// every receiver decodes. Each row's stochastic rounding is keyed by (seed,
// epoch, layer and direction, original node id), not by rank, so a run's
// results do not depend on P, and dense and sparse exchanges agree.
//
// With delta, a refreshed root sends the change of its block against the
// copy every rank already holds, which receivers add; the owner tracks
// that copy exactly, so rounding errors never accumulate.

import (
	"fmt"
	"math"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/staleness"
)

// wireState is a cache's encoding: how wide, and what the current exchange
// sends.
type wireState struct {
	bits   int     // wire.FP32 (floats as they are), BF16, 8/4/2, or wire.Auto
	delta  bool    // send a refreshed root's change, not its block
	maxErr float64 // wire.Auto: the largest relative error allowed
	stream uint64  // keys the rounding, with the seed and the epoch

	used    []int    // bits root j encoded with in this exchange
	add     []bool   // root j's rows are a delta to add to the cached copy
	own     []byte   // this rank's rows, encoded
	rowHash []uint64 // the epoch-independent part of each row's rounding key
	// enc, when set, are the only rows of this rank's block that are read
	// (by its own product or a peer): the others are not encoded, and
	// their bytes and decoded copies are left as they were (output.go).
	enc    []int32
	diff   []float32 // this rank's change against the cached copy (delta)
	trial  []float32 // rows decoded while wire auto tries a width
	rows   []float32 // a cluster batch's received rows, decoded before they are placed
	packed [][]byte  // packed[j]: root j's rows as received

	keepPacked bool  // --cache-bits: every root's block stays packed until used
	lent       bool  // float32 slots the engine lends every layer's evaluation (lendEvalSlots)
	packedBits []int // the width packed[j] was received (or encoded) in
	// drop, when set, is the mask this rank's rows are dropped with as
	// they are encoded, a block of rows at a time (dropsAsEncoded), for
	// the exchange under way.
	drop matrix.Mask
	// fused, when set, are this rank's rows (on the host) for its own
	// product to encode a range at a time as it multiplies them, dropped
	// with fusedDrop, the encoding kept nowhere (fusesOwn). fusedKey keys
	// their rounding, fusedErr sums their error as encode does, and
	// fusedBytes holds one block of rows encoded.
	fused      []float32
	fusedDrop  matrix.Mask
	fusedKey   uint64
	fusedErr   [2]float64
	fusedBytes []byte

	// tail is how many values at the end of each row travel as bf16
	// where the rest travels narrower than float32 (wire.Tailed; GAT's
	// gradient rows), and codecs the codecs made for it, by width.
	tail   int
	codecs map[int]wire.Codec

	bitsSum, errSum float64 // statistics of this rank's encodings
	sends           int
	epochErr        float64 // relative error of this epoch's encoding
}

func (c *cache) quantized() bool { return c.wire.bits != wire.FP32 }

// prepare readies an exchange: every root sends at the configured width
// (an automatic one is chosen by its owner later), and sends a delta when
// deltas are on and every rank already holds a copy of it (last: the
// versions before this epoch).
func (w *wireState) prepare(last []int) {
	for j, l := range last {
		w.add[j] = w.delta && l >= 0
		w.used[j] = w.bits
	}
}

// rowBytes is the size of one of root j's rows on the wire this exchange.
func (c *cache) rowBytes(j int) int { return c.wire.codec(c.wire.used[j]).RowBytes(c.width) }

// codecOf is the codec of a width, named here once: the kernels' C
// integer codec for 8, 4 and 2 bits (the same bytes as the reference, and
// faster), collectives/wire's Go codec for bf16 and fp32.
func codecOf(bits int) wire.Codec {
	if bits <= 8 {
		return kernels.IntCodec(bits)
	}
	return wire.Reference(bits)
}

// codec is the cache's codec of a width (codecOf), with its rows' tail
// in bf16 where the cache has one.
func (w *wireState) codec(bits int) wire.Codec {
	if w.tail == 0 {
		return codecOf(bits)
	}
	c, ok := w.codecs[bits]
	if !ok {
		if w.codecs == nil {
			w.codecs = map[int]wire.Codec{}
		}
		c = wire.Tailed(codecOf(bits), w.tail)
		w.codecs[bits] = c
	}
	return c
}

// unpack decodes root j's received rows into its cached copy, or, for a
// cache kept packed, notes the width they are packed in.
func (c *cache) unpack(j int, src []byte) {
	if c.host[j] == nil {
		c.wire.packedBits[j] = c.wire.used[j]
		return
	}
	c.wire.decode(c.host[j], src, c.width, c.wire.used[j], c.wire.add[j])
}

// decode unpacks rows packed at the given width.
func (w *wireState) decode(dst []float32, src []byte, width, bits int, add bool) {
	w.codec(bits).Decode(dst, src, width, add)
}

// recvBuf is a buffer for n of root j's rows.
func (c *cache) recvBuf(j, n int) []byte {
	need := n * c.rowBytes(j)
	if cap(c.wire.packed[j]) < need {
		c.wire.packed[j] = make([]byte, need)
	}
	return c.wire.packed[j][:need]
}

// encodeOwn is the owner's half of a quantized exchange: it encodes this
// rank's block own (on the host) — the whole block, or its change against
// the copy every rank holds when delta is on and a copy exists — keeps the
// decoded values in its own slot (with --cache-bits, the encoding itself,
// or, where fusesOwn, nothing: the product encodes it), and shares the
// widths the owners chose when they choose them.
func (e *Engine) encodeOwn(c *cache, epoch int, own []float32, active []bool) error {
	me, w := e.rank, &c.wire
	if active[me] {
		x := own
		if w.add[me] {
			w.diff = grow(w.diff, len(own))
			for i, v := range own {
				w.diff[i] = v - c.host[me][i]
			}
			x = w.diff
		}
		key := e.rowKey(c, epoch)
		if w.bits == wire.Auto {
			w.used[me] = w.choose(x, own, c.width, key)
		}
		fused := e.fusesOwn(c)
		switch {
		case fused: // encoded as its own product reads it (productInRanges)
			w.fused, w.fusedDrop, w.fusedKey, w.fusedErr = own, w.drop, key, [2]float64{}
			w.packed[me], w.packedBits[me] = nil, w.used[me]
		case w.drop.P > 0:
			w.epochErr = w.encodeDropped(c.ranges, own, c.width, w.used[me], key)
			w.packed[me], w.packedBits[me] = w.own, w.used[me]
		case e.batch == nil:
			w.epochErr = w.encode(w.ownDecoded(c.host[me], len(x), w.used[me]), x, own, c.width, w.used[me], key, w.add[me], sampleEvery)
			if w.keepPacked {
				w.packed[me], w.packedBits[me] = w.own, w.used[me]
			}
		default: // a cluster batch refreshes its own rows only
			w.trial = grow(w.trial, len(x))
			w.epochErr = w.encode(w.trial, x, own, c.width, w.used[me], key, false, sampleEvery)
			e.copyBatchRows(c.host[me], w.trial, c.width)
		}
		if c.dev[me] != nil {
			e.be.Upload(c.dev[me])
		}
		w.bitsSum += float64(w.used[me])
		if !fused { // else when the product has encoded every row
			w.errSum += w.epochErr
		}
		w.sends++
	}
	w.drop = matrix.Mask{} // this exchange's alone
	if w.bits != wire.Auto {
		return nil
	}
	used := make([]byte, e.P)
	if err := collectives.AllgatherFlags(e.c, byte(w.used[me]), used); err != nil {
		return fmt.Errorf("sharing wire widths: %w", err)
	}
	for j, b := range used {
		w.used[j] = int(b)
	}
	return nil
}

// dropsAsEncoded reports whether c's owner can drop its rows as it
// encodes them, a block of rows at a time into the range buffer, rather
// than into a copy of its whole block first: a block kept packed, encoded
// at a fixed integer width, on the CPU's kernels, and no product reading
// the dropped rows themselves (--fresh-diagonal).
func (e *Engine) dropsAsEncoded(c *cache) bool {
	w := &c.wire
	_, cpu := kernels.ColumnsOf(e.be)
	return c.ranges != nil && cpu && w.bits >= 2 && w.bits <= 8 && w.tail == 0 && !w.delta && w.enc == nil && e.batch == nil && !e.plan.Staleness.FreshDiagonal
}

// fusesOwn reports whether c's owner encodes its rows a range at a time
// as its own product reads them, keeping no encoding of its block: one
// rank, whose block no peer reads, encoding it afresh every exchange (no
// root is ever stale), where its product runs over ranges of rows.
func (e *Engine) fusesOwn(c *cache) bool {
	_, never := c.policy.(staleness.None)
	return e.P == 1 && never && e.dropsAsEncoded(c) && !e.plan.Model.Arch.Attends() && c.inRanges(e.be, e.rank, false)
}

// fusedRows is how many rows of the given width a range of a fused own
// product encodes: a multiple of encodeRows, so that its error sums are
// encode's.
func fusedRows(width int) int { return max(encodeRows, rangeRows(width)/encodeRows*encodeRows) }

// encodeFused encodes rows [lo, hi) of this rank's fused rows x (dropped
// already where they are dropped) and writes them decoded into dec,
// encodeRows at a time, summing their error.
func (w *wireState) encodeFused(dec, x []float32, lo, hi, width, bits int) {
	codec := w.codec(bits)
	rb := codec.RowBytes(width)
	w.fusedBytes = grow(w.fusedBytes, max(len(w.fusedBytes), min(encodeRows, hi-lo)*rb))
	for a := lo; a < hi; a += encodeRows {
		b := min(hi, a+encodeRows)
		d, v := dec[(a-lo)*width:(b-lo)*width], x[(a-lo)*width:(b-lo)*width]
		e, r := codec.Encode(w.fusedBytes[:(b-a)*rb], d, v, v, width, w.fusedKey, w.rowHash[a:b], false, sampleEvery)
		w.fusedErr[0] += e
		w.fusedErr[1] += r
	}
}

// fusedDone ends a fused own product: its error, as encode reports it.
func (w *wireState) fusedDone() {
	errSq, refSq := w.fusedErr[0], w.fusedErr[1]
	w.epochErr = math.Sqrt(errSq)
	if refSq != 0 {
		w.epochErr = math.Sqrt(errSq / refSq)
	}
	w.errSum += w.epochErr
	w.fused = nil
}

// encodeRows is how many rows encodeDropped drops and encodes at a time.
var encodeRows = kernels.EncodeBlock

// encodeDropped encodes this rank's rows x dropped with w.drop into
// w.own, dropping encodeRows at a time into s's buffer: the bytes, and
// the error sums, of dropping the block whole and encoding it.
func (w *wireState) encodeDropped(s *packedScratch, x []float32, width, bits int, key uint64) float64 {
	codec := w.codec(bits)
	rb, n := codec.RowBytes(width), len(w.rowHash)
	w.own = grow(w.own, n*rb)
	step := min(max(n, 1), encodeRows)
	s.rows = grow(s.rows, max(len(s.rows), step*width))
	var errSq, refSq float64
	for lo := 0; lo < n; lo += step {
		hi := min(n, lo+step)
		m := offsetMask(w.drop, lo, hi)
		buf := &matrix.Dense{Rows: hi - lo, Cols: width, Data: s.rows[:(hi-lo)*width]}
		kernels.Dropout(m, buf, &matrix.Dense{Rows: hi - lo, Cols: width, Data: x[lo*width : hi*width]})
		e, r := codec.Encode(w.own[lo*rb:hi*rb], nil, buf.Data, buf.Data, width, key, w.rowHash[lo:hi], false, sampleEvery)
		errSq += e
		refSq += r
	}
	if refSq == 0 {
		return math.Sqrt(errSq)
	}
	return math.Sqrt(errSq / refSq)
}

// ownDecoded is where an encoding of this rank's n values writes them
// decoded: its slot; for a block kept packed, nowhere where the codec
// writes none (the C integer codec: the owner decodes its rows where it
// multiplies them, as its receivers do), else scratch rows.
func (w *wireState) ownDecoded(slot []float32, n, bits int) []float32 {
	if slot != nil {
		return slot
	}
	if _, ok := w.codec(bits).(kernels.IntCodec); ok {
		return nil
	}
	w.trial = grow(w.trial, n)
	return w.trial
}

// sampleEvery is the row stride of the reported quantization error: an
// eighth of the rows measure it well enough, at an eighth of the cost.
const sampleEvery = 8

// encode packs x (a block, or a delta with add) at the given width into
// w.own, writes the decoded rows into dec (added to it with add) and
// returns the relative error ‖decoded − ref‖/‖ref‖ over every errEvery-th
// row, ref being the block the decoded copy stands for.
func (w *wireState) encode(dec, x, ref []float32, width, bits int, key uint64, add bool, errEvery int) float64 {
	codec := w.codec(bits)
	w.own = grow(w.own, len(w.rowHash)*codec.RowBytes(width))
	errSq, refSq := wire.EncodeRows(codec, w.own, dec, x, ref, width, key, w.rowHash, w.enc, add, errEvery)
	if refSq == 0 {
		return math.Sqrt(errSq)
	}
	return math.Sqrt(errSq / refSq)
}

// choose is wire auto's width: the fewest bits whose relative error on
// this block stays within maxErr (float32 when none does). Trials decode
// into scratch rows, leaving the cached copy as it is.
func (w *wireState) choose(x, ref []float32, width int, key uint64) int {
	w.trial = grow(w.trial, len(x))
	for _, b := range wire.Widths {
		if b == wire.FP32 || w.encode(w.trial, x, ref, width, b, key, false, 1) <= w.maxErr {
			return b
		}
	}
	return wire.FP32
}

// rowKey is this exchange's rounding key; with the row hashes (by each
// row's original node id, made once) it keys every row of this rank's
// block.
func (e *Engine) rowKey(c *cache, epoch int) uint64 {
	if len(c.wire.rowHash) != e.rows() {
		c.wire.rowHash = make([]uint64, e.rows())
		for r := range c.wire.rowHash {
			c.wire.rowHash[r] = wire.RowHash(uint64(e.ownID(r)))
		}
	}
	return wire.Seed(e.plan.Optim.Seed^c.wire.stream, uint64(epoch))
}

// grow returns b with length n, reallocated only when too small.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// linkWires are the forward blocks' default widths by the rate measured
// between ranks (GB/s per rank, all sending at once) when no --wire is
// given: the first whose rate the link is below. Below 0.2 GB/s (1.6
// Gbit/s a rank: 1 Gbit/s for one or two ranks, 10 Gbit/s shared by
// eight) int2, held within a point of fp32 (TestQuantizedAccuracy),
// reached the target soonest or within 1.04x of the soonest for every
// model measured, int8 included (results/README.md, "Links"). Above it
// fp32 keeps every rank count's losses equal, at a cost of 1.03–1.28x
// against int8 measured at 0.31 GB/s on an idle host.
//
// One threshold, between the rates links give: 1 Gbit/s a rank measures
// at most 0.125, 10 Gbit/s shared by four 0.31, and ranks sharing an
// uncapped host link measured 0.24 or more with the cores oversubscribed
// fifteen times (results/scaling/wire-choice.tsv); a width between would
// be chosen one run and not the next.
var linkWires = []linkWire{{0.2, 2}}

// linkWire is a default width and the rate a link must be below to get it.
type linkWire struct {
	Below float64
	Wire  wire.Format
}

// WireForLink is the forward blocks' default width on a link measured at
// gbs, and the rate the link fell below to get it (0: fp32, unmeasured or
// fast).
func WireForLink(gbs float64) (f wire.Format, below float64) {
	for _, w := range linkWires {
		if gbs > 0 && gbs < w.Below {
			return w.Wire, w.Below
		}
	}
	return wire.FP32, 0
}

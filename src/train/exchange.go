package train

import (
	"fmt"
	"iter"
	"time"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/staleness"
)

// A cache holds, for one layer and one direction of traffic (forward
// embeddings, backward gradients, or evaluation), every root's block as
// this rank last received it: the historical embeddings that SANCUS reuses
// while a root is stale. Root j's slot holds the rows of j this rank
// multiplies (all of them with dense broadcasts, the ones its block of Â
// references with the sparse exchange); this rank's own slot holds its
// block as last broadcast, so the owner multiplies the very copy the others
// use.
type cache struct {
	name     string
	width    int
	rows     []int            // rows[j]: how many of root j's rows this rank holds
	host     [][]float32      // host[j]: root j's rows, row-major; what transports read and write
	dev      []*matrix.Dense  // the same blocks where the backend computes
	last     []int            // epoch root j last broadcast (-1: never, nothing cached)
	log      [][]int          // epochs in which root j broadcast (SANCUS Figure 24)
	policy   staleness.Policy // decides which roots broadcast
	ref      []float32        // variation-gap: this rank's block when it last broadcast
	route    route            // how the blocks are made, sent, dropped and multiplied (route.go)
	me       int              // this rank: its slot stays untouched while route.direct
	scratch  *matrix.Dense    // one masked block at a time, made at the first (maskScratch)
	mostRows int              // the rows of the largest block held: scratch's
	wire     wireState        // how the blocks are encoded on the wire (wire.go)
	blocks   []*matrix.CSR    // blocks[j] multiplies root j's block (Â_ij; GraphSAGE: its mean or pattern)
	full     []*matrix.CSR    // the whole graph's blocks (blocks, outside a cluster batch)
	// send, when set, are this rank's rows for each rank that its blocks
	// read, for a sparse exchange to move instead of all it would; the
	// slots of the other roots then hold only those rows (hold, output.go):
	// held[j] are their positions in root j's slot of the view, heldOf[j]
	// rows, and ids[j] their node ids, which key dropout where the receiver
	// draws it (heldIDs: made at the first such draw, since a sender that
	// drops as it packs, and a gradient cache, never do; 1 MB a rank at
	// P = 4 on the 100k graph).
	send   [][]int32
	held   [][]int32
	heldOf []int
	ids    [][]int64
	// outRows, when set, are the only rows of the output the blocks have
	// entries in, ascending (the restricted last layer's training rows,
	// output.go): the products form those alone and leave the others
	// unwritten.
	outRows []int32
	// read, when set, are the rows of each root's slot the blocks read,
	// ascending: dropout draws only those (output.go).
	read [][]int32
	// occupied[j] lists the rows of block j that hold entries, with their
	// pointers (kernels.OccupiedRows; none where every row does), made at
	// set-up for the blocks the cache multiplies outside a cluster batch
	// (occupiedFor): a product that adds to the output runs over those
	// alone, through addAt. At P ranks a rank's block row splits into P
	// blocks, most rows of which are empty past a few dozen ranks; a
	// product over every row (or every training row) would stream the
	// whole output, and the row pointers, P times.
	occupied    []kernels.OccupiedRows
	occupiedFor []*matrix.CSR
	addAt       func(out *matrix.Dense, a *matrix.CSR, b *matrix.Dense, o kernels.OccupiedRows) error
	// slab is the one buffer every float slot lies in (slotsLaid),
	// slabAt[j] the row root j's starts at (-1: none); merge, its runs of
	// peer blocks multiplied as one (merge.go).
	slab   []float32
	slabAt []int
	merge  *merged

	// With --cache-bits, every root's block stays as it arrived (packed in
	// wire.packed; this rank's own as it encoded it, wire.go): host[j] and
	// dev[j] are nil. A product decodes a range of a block's rows at a
	// time into the rank's one buffer (packedScratch); where it cannot (a
	// GAT layer's attention, a backend without kernels.Columner, a block
	// whose rows list their columns out of order) the block is decoded
	// whole into decoded, made at the first such use.
	decoded *matrix.Dense
	ranges  *packedScratch
	sorted  []int8 // sorted[j]: 0 not known yet, 1 blocks[j]'s rows list their columns ascending, -1 not
}

func newCache(be kernels.Backend, name string, width int, rows []int, blocks []*matrix.CSR, p staleness.Policy, w wireState, me int, ranges *packedScratch) *cache {
	c := &cache{name: name, width: width, rows: rows, policy: p, blocks: blocks, full: blocks, host: make([][]float32, len(rows)),
		dev: make([]*matrix.Dense, len(rows)), last: make([]int, len(rows)), log: make([][]int, len(rows)), wire: w, me: me}
	c.wire.used, c.wire.add, c.wire.packed = make([]int, len(rows)), make([]bool, len(rows)), make([][]byte, len(rows))
	c.wire.packedBits = make([]int, len(rows))
	most := 0
	for j, r := range rows {
		c.last[j] = -1
		most = max(most, r)
	}
	if !w.keepPacked && !w.lent { // the peers' in one slab (merge.go), this rank's apart
		c.slotsLaid(be, matrix.Make[float32](c.slotFloats(false)), false)
		c.host[me] = matrix.Make[float32](rows[me] * width)
		c.dev[me] = be.Mirror(c.host[me], rows[me], width)
	}
	c.mostRows = most
	if w.keepPacked {
		c.ranges, c.sorted = ranges, make([]int8, len(rows))
	}
	return c
}

// decodeRangeBytes bounds the buffer a packed block's rows are decoded
// into for a product: a range of this many bytes of float32 rows at a
// time (kernels.SpMMColumns), so the buffer stays the same size however
// large the blocks grow. Each range costs a pass over the output's rows,
// so ranges far smaller than a block cost time; 4 MB is 4,096 rows of 256.
var decodeRangeBytes = 4 << 20

// packedScratch is a rank's one buffer for products over blocks kept
// packed, which its caches share (one product runs at a time): a range
// of a block's rows decoded, and, for each row of the output, where its
// nonzeros for the next range start.
type packedScratch struct {
	rows, drop []float32 // drop: a fused own range's rows dropped (fusesOwn)
	cursor     []int64
}

// rangeRows is how many rows of the given width a range decodes.
func rangeRows(width int) int { return max(1, decodeRangeBytes/(4*max(1, width))) }

// bytes is what the buffer holds.
func (s *packedScratch) bytes() int64 {
	if s == nil {
		return 0
	}
	return 4*int64(len(s.rows)+len(s.drop)) + 8*int64(len(s.cursor))
}

// inRanges reports whether root j's product can run over its block a
// range of rows at a time: the block is kept packed, the backend has the
// kernel, the block's rows list their columns ascending, and no mask is
// drawn at rows listed apart (read).
func (c *cache) inRanges(be kernels.Backend, j int, masked bool) bool {
	if c.ranges == nil || c.dev[j] != nil || masked && c.read != nil {
		return false
	}
	if _, ok := kernels.ColumnsOf(be); !ok {
		return false
	}
	if c.sorted[j] == 0 {
		c.sorted[j] = -1
		if kernels.SortedColumns(c.blocks[j]) {
			c.sorted[j] = 1
		}
	}
	return c.sorted[j] > 0
}

// productInRanges sets out (adds to it, with accumulate) a · M(B_j), a
// being c.blocks[j] at the output rows r (nil: every row; with ptr, their
// own pointers), B_j root j's block kept packed and M the mask m (P = 0:
// none): decoded, masked and multiplied a range of rows at a time, the
// same values bit for bit as the product over the block decoded whole.
func (c *cache) productInRanges(be kernels.Backend, out *matrix.Dense, a *matrix.CSR, j int, rows []int32, ptr []int64, m matrix.Mask, accumulate bool) error {
	cols, _ := kernels.ColumnsOf(be)
	s, n, w := c.ranges, c.rows[j], c.width
	fused := j == c.me && c.wire.fused != nil // encoded here, range by range (fusesOwn)
	step := rangeRows(w)
	if fused {
		step = fusedRows(w)
	}
	step = min(max(n, 1), step)
	s.rows = grow(s.rows, max(len(s.rows), step*w))
	if fused && c.wire.fusedDrop.P > 0 {
		s.drop = grow(s.drop, max(len(s.drop), step*w))
	}
	if len(s.cursor) < a.Rows { // a list of rows is some of a's
		s.cursor = make([]int64, a.Rows)
	}
	rb := c.wire.codec(c.wire.packedBits[j]).RowBytes(w)
	for lo := 0; lo < n || lo == 0; lo += step {
		hi := min(n, lo+step)
		part := &matrix.Dense{Rows: hi - lo, Cols: w, Data: s.rows[:(hi-lo)*w]}
		switch {
		case fused:
			x := c.wire.fused[lo*w : hi*w]
			if m := c.wire.fusedDrop; m.P > 0 {
				dropped := &matrix.Dense{Rows: hi - lo, Cols: w, Data: s.drop[:(hi-lo)*w]}
				kernels.Dropout(offsetMask(m, lo, hi), dropped, &matrix.Dense{Rows: hi - lo, Cols: w, Data: x})
				x = dropped.Data
			}
			c.wire.encodeFused(part.Data, x, lo, hi, w, c.wire.packedBits[j])
		case c.last[j] < 0: // never received: zeros, as a fresh slot holds
			clear(part.Data)
		default:
			c.wire.decode(part.Data, c.wire.packed[j][lo*rb:hi*rb], w, c.wire.packedBits[j], false)
		}
		if m.P > 0 {
			be.Dropout(offsetMask(m, lo, hi), part, part)
		}
		r := kernels.ColumnRange{Lo: lo, Hi: hi, Rows: rows, Ptr: ptr, Cursor: s.cursor, First: lo == 0}
		if err := cols.SpMMColumns(out, a, part, r, accumulate || lo > 0); err != nil {
			return err
		}
	}
	if fused {
		c.wire.fusedDone()
	}
	return nil
}

// offsetMask is m at rows [lo, hi) of the rows it keys: the same draws,
// keyed by node id.
func offsetMask(m matrix.Mask, lo, hi int) matrix.Mask {
	if m.IDs != nil {
		m.IDs = m.IDs[lo:hi]
	} else {
		m.Row0 += lo
	}
	return m
}

// occupiedRows lists each block's rows with entries (none for a block
// every row of which holds some, or none does), a block listed once
// however many caches multiply it (seen).
func occupiedRows(blocks []*matrix.CSR, seen map[*matrix.CSR]kernels.OccupiedRows) []kernels.OccupiedRows {
	occ := make([]kernels.OccupiedRows, len(blocks))
	for j, b := range blocks {
		if b == nil {
			continue
		}
		o, ok := seen[b]
		if !ok {
			if o = kernels.Occupied(b); len(o.Rows) == b.Rows {
				o = kernels.OccupiedRows{}
			}
			seen[b] = o
		}
		occ[j] = o
	}
	return occ
}

// routeRows makes the cache's table of occupied rows for the blocks it
// now multiplies, where the backend has row products: through the rows'
// own pointers where it can, else at their list.
func (c *cache) routeRows(be kernels.Backend, seen map[*matrix.CSR]kernels.OccupiedRows) {
	ro, ok := kernels.RowsOf(be)
	if !ok || len(c.blocks) == 0 {
		return
	}
	c.occupied, c.occupiedFor = occupiedRows(c.blocks, seen), c.blocks
	if oc, ok := kernels.OccupiedOf(be); ok {
		c.addAt = func(out *matrix.Dense, a *matrix.CSR, b *matrix.Dense, o kernels.OccupiedRows) error {
			return oc.SpMMOccupied(out, a, b, o, true)
		}
	} else {
		c.addAt = func(out *matrix.Dense, a *matrix.CSR, b *matrix.Dense, o kernels.OccupiedRows) error {
			return ro.SpMMRows(out, a, b, o.Rows, true)
		}
	}
}

// rowsOf is the occupied rows of block j, where the cache multiplies the
// blocks its table was made for (not a cluster batch's); none listed: a
// product passes every row it writes.
func (c *cache) rowsOf(j int) kernels.OccupiedRows {
	if !c.multiplies(c.occupiedFor) {
		return kernels.OccupiedRows{}
	}
	return c.occupied[j]
}

// multiplies reports whether the cache now multiplies the blocks a set-up
// table was made for (blocks), not a cluster batch's.
func (c *cache) multiplies(blocks []*matrix.CSR) bool {
	return len(blocks) > 0 && len(c.blocks) > 0 && &c.blocks[0] == &blocks[0]
}

// maskScratch is the buffer a block of the given rows is masked into,
// made at the first masked product: many caches never mask (an
// evaluation's, a gradient's, one whose senders drop the rows as they pack
// them), and a buffer made but never used would count in the compulsory
// bytes while its pages were resident or not as the allocator placed it.
func (c *cache) maskScratch(be kernels.Backend, rows int) *matrix.Dense {
	if c.scratch == nil {
		c.scratch = be.NewDense(c.mostRows, c.width)
	}
	return c.scratch.Prefix(rows)
}

// spmm sets out (adds to it, with accumulate) a · B_j, a being rows of
// c.blocks[j]: over a packed block a range of rows at a time where it can.
func (c *cache) spmm(be kernels.Backend, out *matrix.Dense, a *matrix.CSR, j int, accumulate bool) error {
	if c.inRanges(be, j, false) {
		return c.productInRanges(be, out, a, j, nil, nil, matrix.Mask{}, accumulate)
	}
	return be.SpMM(out, a, c.block(be, j), accumulate)
}

// block is root j's cached block where the backend computes: its slot, or,
// for a block kept packed, the block decoded into c.decoded (valid until
// the next call).
func (c *cache) block(be kernels.Backend, j int) *matrix.Dense {
	if c.dev[j] != nil {
		return c.dev[j]
	}
	if c.decoded == nil {
		c.decoded = be.Mirror(make([]float32, c.mostRows*c.width), c.mostRows, c.width)
	}
	h := c.decoded.Data[:c.rows[j]*c.width]
	if c.last[j] < 0 { // never received: zeros, as a fresh slot holds
		clear(h)
	} else {
		c.wire.decode(h, c.wire.packed[j], c.width, c.wire.packedBits[j], false)
	}
	be.Upload(c.decoded)
	return c.decoded.Prefix(c.rows[j])
}

// scatter makes root j's received rows (buf) the cached copies of the rows
// at positions pos (a cluster batch's part of the block).
func (c *cache) scatter(be kernels.Backend, j int, buf []byte, pos []int32) error {
	if c.quantized() { // decoded in one call, then placed
		c.wire.rows = grow(c.wire.rows, len(pos)*c.width)
		c.wire.decode(c.wire.rows, buf, c.width, c.wire.used[j], false)
		buf = collectives.Bytes(c.wire.rows)
	}
	if err := kernels.ScatterRows(collectives.Bytes(c.host[j]), buf, pos, 4*c.width); err != nil {
		return fmt.Errorf("block %d: %w", j, err)
	}
	be.Upload(c.dev[j])
	return nil
}

// arrived makes root j's received rows (buf) its cached copy.
func (c *cache) arrived(be kernels.Backend, j int, buf []byte) {
	if c.quantized() {
		c.unpack(j, buf)
	}
	if c.dev[j] != nil {
		be.Upload(c.dev[j])
	}
}

// An exchanger is one way blocks travel between ranks. exchange makes this
// rank's cached copy of every active root's block current — a stale root
// sends nothing, every rank knowing it from the shared active vector — and
// calls use(j) for every root j, as soon as block j is usable: its own
// block first, then the others in order, so the caller multiplies what it
// holds while the rest are still on the wire.
// The owner's block is already in its own slot where the backend computes
// (and, for a quantized cache, encoded: wire.go); an exchanger that sends
// from the host downloads it. It returns the time spent blocked on the network, and counts its bytes in
// the communicator's statistics.
type exchanger interface {
	exchange(c *cache, own *ownRows, active []bool, use func(j int) error) (wait time.Duration, err error)
}

// ringExchange is SANCUS as published: every active root's whole block goes
// around a pipelined ring broadcast (or MPI_Bcast), in root order.
type ringExchange struct {
	comm  collectives.Comm
	be    kernels.Backend
	bcast collectives.BcastFunc
}

func (x *ringExchange) exchange(c *cache, _ *ownRows, active []bool, use func(j int) error) (time.Duration, error) {
	me := x.comm.Rank()
	bufs := make([][]byte, len(active)) // what travels for each active root
	for j, a := range active {
		switch {
		case !a:
		case j == me && c.quantized():
			bufs[j] = c.wire.own
		case j == me:
			x.be.Download(c.dev[me])
			bufs[j] = collectives.Bytes(c.host[j])
		case c.quantized():
			bufs[j] = c.recvBuf(j, c.rows[j])
		default:
			bufs[j] = collectives.Bytes(c.host[j])
		}
	}
	ready := make(chan int, len(active))
	errc := make(chan error, 1)
	go func() {
		errc <- collectives.SkipBcast(x.comm, bufs, active, x.bcast, func(j int) { ready <- j })
		close(ready)
	}()
	var wait time.Duration
	err := use(me) // its slot is current before the ring starts
	for {
		t := time.Now()
		j, ok := <-ready
		wait += time.Since(t)
		if !ok {
			break
		}
		if j == me {
			continue
		}
		if active[j] { // a fresh copy arrived on the host
			c.arrived(x.be, j, bufs[j])
		}
		if err == nil { // after a failure, only drain the broadcasts
			err = use(j)
		}
	}
	if cerr := <-errc; cerr != nil {
		return wait, cerr
	}
	return wait, err
}

// blockExchange moves whole blocks where the backend keeps them through a
// BlockComm (NCCL: device to device, in one group of the active roots'
// broadcasts), then uses every block. Transfers are queued on the device
// with the kernels, so their time shows as compute, not as a wait.
type blockExchange struct {
	comm collectives.Comm
	bc   collectives.BlockComm
}

func (x *blockExchange) exchange(c *cache, _ *ownRows, active []bool, use func(j int) error) (time.Duration, error) {
	start := time.Now()
	if err := x.bc.SkipBcast(c.dev, active); err != nil {
		return 0, fmt.Errorf("%s skip-broadcast: %w", x.bc.Name(), err)
	}
	if x.bc.Name() != "host" { // the host path counts its own bytes
		var sent, recvd int64
		for j, a := range active {
			switch {
			case !a:
			case j == x.comm.Rank():
				sent += int64(c.rows[j]*c.width) * 4 // the root's copy into the ring
			default:
				recvd += int64(c.rows[j]*c.width) * 4
			}
		}
		x.comm.Stats().Add(x.bc.Name()+"_skip_bcast", sent, recvd, time.Since(start))
	}
	for j := range ownFirst(x.comm.Rank(), len(active)) { // as the others sum
		if err := use(j); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// ownFirst is the order exchanges use blocks in: this rank's own, which
// needs no transfer, then the others by root (an iterator: nothing is
// made each exchange).
func ownFirst(me, p int) iter.Seq[int] {
	return func(yield func(int) bool) {
		if !yield(me) {
			return
		}
		for j := range p {
			if j != me && !yield(j) {
				return
			}
		}
	}
}

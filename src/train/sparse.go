package train

// Sparsity-aware exchange. A dense broadcast hands every rank all of root
// j's block H_j, but rank i only multiplies the rows that Â_ij references.
// Here each rank learns once, at start-up, which of its rows every other
// rank needs; an active root then sends each rank exactly those rows
// (point to point), a stale root sends nothing, and caches hold only the
// rows a rank uses. With a partition that keeps most edges inside blocks,
// that is a small fraction of H; where a rank uses nearly all of a root's
// rows, it asks for all, and they travel whole, unpacked (wholeBlockShare).
// Results are the same as with the dense broadcast: the compacted blocks
// keep their column order, so every sum runs in the same order.

import (
	"fmt"
	"time"

	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
)

const tagSparse = collectives.TagUser + 1

// columnsUsed lists the distinct columns of a block, sorted.
func columnsUsed(b *matrix.CSR) []int32 {
	seen := make([]bool, b.Cols)
	for _, c := range b.ColIdx {
		seen[c] = true
	}
	return listed(seen)
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

// wholeBlockShare is the percentage of a root's rows past which a rank asks
// for all of them: the root then sends its block whole, straight from its
// rows, with no pack buffer and no gather (the few unused rows travel too).
// On the planted graphs a rank uses 99.7% of each peer's rows at P = 4:
// asked whole, the pack buffers of a P = 4 rank on the 100k graph
// shrink to what the restricted last layer sends in training. Above 100,
// no rows are sent whole, even where all are used: every send is packed
// (the tests' baseline).
var wholeBlockShare = 98

// allRows lists 0 … n-1.
func allRows(n int) []int32 {
	r := make([]int32, n)
	for i := range r {
		r[i] = int32(i)
	}
	return r
}

// whole reports whether rows (ascending, as every send list is) are all n
// of a rank's rows.
func whole(rows []int32, n int) bool {
	return len(rows) == n && (n == 0 || rows[n-1] == int32(n-1))
}

// sparseView compacts every off-diagonal block to the rows it uses and
// tells every root which of its rows each rank needs (two all-to-alls of
// index lists at start-up). It returns the view and, per rank, the local
// rows this rank must send it.
func (e *Engine) sparseView() (view, [][]int32, error) {
	v := view{blocks: make([]*matrix.CSR, e.P), ids: make([][]int64, e.P), rows: make([]int, e.P)}
	need := make([][]int32, e.P) // need[j]: root j's local rows this rank uses
	sendCounts, recvCounts := make([]int, e.P), make([]int, e.P)
	for j, b := range e.s.Blocks {
		if j == e.rank {
			v.blocks[j], v.ids[j], v.rows[j] = b, e.part.ownIDs, e.rows()
			continue
		}
		if need[j] = columnsUsed(b); len(need[j]) > 0 && 100*len(need[j]) >= wholeBlockShare*b.Cols {
			need[j], v.blocks[j] = allRows(b.Cols), b // the block as it is
		} else {
			v.blocks[j] = compactBlock(b, need[j])
		}
		v.rows[j], sendCounts[j] = len(need[j]), len(need[j])
	}
	sendIdx, err := e.askRoots(need, e.rows())
	if err != nil {
		return v, nil, fmt.Errorf("sparse exchange set-up: %w", err)
	}
	idsOut := make([]int64, 0, e.rows())
	for i, idx := range sendIdx {
		recvCounts[i] = len(idx)
		for _, r := range idx {
			idsOut = append(idsOut, e.ownID(int(r)))
		}
	}
	// The node ids of the rows each rank receives key its dropout masks.
	idsIn := make([]int64, sum(sendCounts))
	if err := collectives.Alltoallv(e.c, idsOut, recvCounts, idsIn, sendCounts); err != nil {
		return v, nil, fmt.Errorf("sparse exchange set-up: %w", err)
	}
	off := 0
	for j, n := range sendCounts {
		if j != e.rank {
			v.ids[j] = idsIn[off : off+n]
			off += n
		}
	}
	// The compacted blocks are all that is multiplied from now on: the
	// engine's shard holds them in place of the uncompacted ones, whose
	// column indices (a 4-byte copy of every off-diagonal nonzero) are let
	// go (the caller's shard keeps them, if the caller keeps the shard).
	sh := *e.s
	sh.Blocks, e.s = v.blocks, &sh
	return v, sendIdx, nil
}

// askRoots tells every root j which of its rows this rank wants (want[j],
// indices below the root's limit, each rank's own list empty) and returns
// what every rank i asked of this one (two all-to-alls).
func (e *Engine) askRoots(want [][]int32, limit int) ([][]int32, error) {
	counts, got, sendCounts := make([]int64, e.P), make([]int64, e.P), make([]int, e.P)
	var wanted []int32
	for j, w := range want {
		counts[j], sendCounts[j] = int64(len(w)), len(w)
		wanted = append(wanted, w...)
	}
	if err := collectives.Alltoallv(e.c, counts, ones(e.P), got, ones(e.P)); err != nil {
		return nil, err
	}
	recvCounts := make([]int, e.P)
	for i, n := range got {
		recvCounts[i] = int(n)
	}
	asked := make([]int32, sum(recvCounts))
	if err := collectives.Alltoallv(e.c, wanted, sendCounts, asked, recvCounts); err != nil {
		return nil, err
	}
	out := make([][]int32, e.P)
	off := 0
	for i, n := range recvCounts {
		out[i] = asked[off : off+n]
		for _, r := range out[i] {
			if r < 0 || int(r) >= limit {
				return nil, fmt.Errorf("rank %d asked for row %d of %d", i, r, limit)
			}
		}
		off += n
	}
	return out, nil
}

// sparseExchange sends each rank, from an active root, only the rows that
// rank's block references (point to point), and receives likewise.
type sparseExchange struct {
	comm    collectives.Comm
	be      kernels.Backend
	sendIdx [][]int32        // sendIdx[i]: this rank's rows that rank i needs
	packed  map[int][][]byte // per row size in bytes: the rows packed for each rank (two chunks at most)
	chunk   int              // the most bytes of rows a message carries
	batch   *batchState      // cluster-batch training: only the batch's rows travel
	recvTmp [][]byte         // a cluster batch's exchange: a root's rows before they are scattered
	// t is every exchange's transfer, its lists made once: an exchange
	// finishes every request before it returns, so the next may reuse
	// them, and an epoch at large P allocates nothing a peer.
	t transfer
}

// rowSets are the rows that travel this exchange of c: to each rank (this
// rank's row ids) and from each root (positions among the rows held of
// it; nil: all of them, in order).
func (x *sparseExchange) rowSets(c *cache) (send, recv [][]int32) {
	switch {
	case x.batch.stepping():
		return x.batch.send, x.batch.recv
	case c.send != nil: // received straight into the slots, which hold just these rows
		return c.send, nil
	}
	return x.sendIdx, nil
}

// defaultExchangeChunk is the most bytes of rows one message carries by
// default (--exchange-chunk). A rank's rows for a peer go in chunks,
// packed in turn into two buffers per peer, so the pack buffers hold two
// chunks per peer at most however many rows the peer needs (unbounded,
// they grow with the rows peers need and the width, and an evaluation's
// full exchange packs a rank's every row). A sender waits for its chunk
// two back to leave before it packs the next, so smaller chunks cost
// time. The default bounds the buffers on large graphs without slowing an
// epoch (results/README.md, "Figures behind choices in the code");
// --exchange-chunk trades.
const defaultExchangeChunk = 64 << 20

// chunkRows is how many rows of rb bytes make a chunk.
func (x *sparseExchange) chunkRows(rb int) int { return max(1, x.chunk/rb) }

// sendBufs are the pack buffers for rows of rowBytes, per peer: two
// chunks, or all the rows packed for it when fewer. A buffer grows to the
// largest send it has packed (none for a peer sent whole): the last layer's
// training sends are a part of the rows the evaluation's full view asks.
func (x *sparseExchange) sendBufs(c *cache, own *ownRows, rowBytes int, send [][]int32) [][]byte {
	b, ok := x.packed[rowBytes]
	if !ok {
		b = make([][]byte, len(x.sendIdx))
		x.packed[rowBytes] = b
	}
	for i, idx := range send {
		if n := min(len(idx), 2*x.chunkRows(rowBytes)) * rowBytes; n > len(b[i]) && !sendsWhole(c, own, idx) {
			b[i] = make([]byte, n)
		}
	}
	return b
}

// sendsWhole reports whether c's rows for a peer, rows, go straight from
// this rank's rows (or layer 1's dropped copy of them): the peer asked for
// all of them and they are not dropped as they are packed.
func sendsWhole(c *cache, own *ownRows, rows []int32) bool {
	return wholeBlockShare <= 100 && whole(rows, c.rows[c.me]) && !own.dropsAsPacked()
}

// transfer is one sparse exchange in flight: its requests, its receive
// buffers and what it counted.
type transfer struct {
	comm        collectives.Comm
	recvs       [][]collectives.Request // a root's chunks, in order
	bufs        [][]byte                // a root's rows as they arrive
	sends       []collectives.Request   // in flight from the halves of rank i's pack buffer: 2i, 2i+1
	sent, recvd int64
	wait        time.Duration // blocked on the network
	// Scratch kept across exchanges (sparseExchange.t): the backing of
	// recvs, a batch's transfers, their requests and slots, a wait's list.
	slots, reqs, waits []collectives.Request
	slotN              []int
	ts                 []collectives.Transfer
	at                 []*collectives.Request
	roots              []int
	sendAt             []*collectives.Request
}

// reset readies t, reused, for an exchange among p ranks.
func (t *transfer) reset(comm collectives.Comm, p int) {
	t.comm, t.sent, t.recvd, t.wait = comm, 0, 0, 0
	if len(t.recvs) != p {
		t.recvs, t.bufs, t.sends = make([][]collectives.Request, p), make([][]byte, p), make([]collectives.Request, 2*p)
		return
	}
	clear(t.recvs)
	clear(t.bufs)
	clear(t.sends)
}

// waitFor adds the time r takes to finish to the exchange's wait.
func (t *transfer) waitFor(r ...collectives.Request) error {
	t0 := time.Now()
	err := collectives.WaitAllOn(t.comm, r)
	t.wait += time.Since(t0)
	return err
}

// recvSlots gives each of a batch's receives, from peers[k] in order, its
// slot in t.recvs[peers[k]], the slices made whole first so that no slot
// moves.
func (t *transfer) recvSlots(peers []int) []*collectives.Request {
	n := grow(t.slotN, len(t.recvs))
	clear(n)
	for _, j := range peers {
		n[j]++
	}
	t.slots = grow(t.slots, len(peers)) // one backing for every root's slots
	off := 0
	for j, c := range n {
		if c > 0 {
			t.recvs[j] = t.slots[off : off+c : off+c]
			clear(t.recvs[j])
			off += c
		}
	}
	t.slotN = n
	at := grow(t.at, len(peers))
	t.at = at
	for k, j := range peers {
		n[j]--
		at[k] = &t.recvs[j][len(t.recvs[j])-1-n[j]]
	}
	return at
}

// start starts a batch of transfers (one hand-off to the transport) and
// files request k at *at[k]: the started ones even on an error, for the
// cleanup to wait out.
func (t *transfer) start(ts []collectives.Transfer, at []*collectives.Request) error {
	reqs := grow(t.reqs, len(ts))
	t.reqs = reqs
	clear(reqs)
	err := collectives.Start(t.comm, ts, reqs)
	for k, r := range reqs {
		*at[k] = r
	}
	return err
}

// exchange posts the receives of every active root, sends this rank's rows
// to the ranks that need them (if it is active), and uses each block as it
// arrives. Rows travel as floats or, for a quantized cache, encoded.
func (x *sparseExchange) exchange(c *cache, own *ownRows, active []bool, use func(j int) error) (wait time.Duration, err error) {
	start, p := time.Now(), len(active)
	t := &x.t
	t.reset(x.comm, p)
	defer func() { // on failure, leave no transfer writing into or reading our buffers
		if err != nil {
			for _, r := range t.recvs {
				collectives.WaitAll(r)
			}
			collectives.WaitAll(t.sends) // (a second Wait returns at once)
			err = fmt.Errorf("sparse exchange: %w", err)
		}
	}()
	sendRows, recvRows := x.rowSets(c)
	if err = x.postRecvs(c, t, active, recvRows); err != nil {
		return 0, err
	}
	if active[x.comm.Rank()] {
		if err = x.sendOwn(c, own, t, sendRows); err != nil {
			return t.wait, err
		}
	}
	if err = x.useArrived(c, t, recvRows, use); err != nil {
		return t.wait, err
	}
	err = t.waitFor(t.sends...)
	x.comm.Stats().Add("sparse_exchange", t.sent, t.recvd, time.Since(start))
	return t.wait, err
}

// postRecvs posts, chunk by chunk and in one batch, the receives of every
// active root's rows: into the cache's slot, its packed buffer
// (quantized), or a buffer to scatter from (a cluster batch's rows,
// recvRows).
func (x *sparseExchange) postRecvs(c *cache, t *transfer, active []bool, recvRows [][]int32) error {
	me := x.comm.Rank()
	ts, roots := t.ts[:0], t.roots[:0]
	defer func() { t.ts, t.roots = ts, roots }()
	if recvRows != nil && x.recvTmp == nil {
		x.recvTmp = make([][]byte, len(active))
	}
	for j, a := range active {
		n := c.rows[j]
		if recvRows != nil {
			n = len(recvRows[j])
		}
		if j == me || !a || n == 0 {
			continue
		}
		rb := 4 * c.width
		if c.quantized() {
			rb = c.rowBytes(j)
		}
		switch {
		case recvRows != nil: // scattered into the cache once here
			x.recvTmp[j] = grow(x.recvTmp[j], n*rb)
			t.bufs[j] = x.recvTmp[j]
		case c.quantized():
			t.bufs[j] = c.recvBuf(j, n)
		default:
			t.bufs[j] = collectives.Bytes(c.host[j])
		}
		for lo, cr := 0, x.chunkRows(rb); lo < n; lo += cr {
			hi := min(n, lo+cr)
			ts = append(ts, collectives.Transfer{Buf: t.bufs[j][lo*rb : hi*rb], Peer: j, Tag: tagSparse, Recv: true})
			roots = append(roots, j)
		}
		t.recvd += int64(n * rb)
	}
	return t.start(ts, t.recvSlots(roots))
}

// ownSource is what this rank sends its rows from: rows, its rows as
// floats (nil when they travel encoded), and src, the bytes that travel,
// rb to a row.
func (x *sparseExchange) ownSource(c *cache, own *ownRows) (rows []float32, src []byte, rb int) {
	me := x.comm.Rank()
	rows, src, rb = c.host[me], c.wire.own, 4*c.width
	switch {
	case c.quantized():
		rows, rb = nil, c.rowBytes(me)
	case c.route.direct: // no copy in the cache: the layer's rows themselves
		x.be.Download(own.rows)
		rows = own.rows.Data[:c.rows[me]*c.width]
	default:
		x.be.Download(c.dev[me])
	}
	if rows != nil {
		src = collectives.Bytes(rows)
	}
	if own.send.P > 0 && own.dropped != nil { // dropped by the layer below (nextDrops)
		src = collectives.Bytes(own.dropped.Data)
	}
	return rows, src, rb
}

// sendOwn sends every peer the rows of this rank it reads: chunk k of
// every peer in turn, each round in one batch, so each peer's first rows
// leave at once; a buffer half is packed again once its last chunk has
// left. The waits stay here,
// not in a sender goroutine: every MPI call goes through one thread, where
// this rank's blocking receive wait would hold up the goroutine's next
// send, the one its peer waits for (that deadlocked under mpirun).
func (x *sparseExchange) sendOwn(c *cache, own *ownRows, t *transfer, sendRows [][]int32) error {
	me := x.comm.Rank()
	rows, src, rb := x.ownSource(c, own)
	out, cr := x.sendBufs(c, own, rb, sendRows), x.chunkRows(rb)
	ts, at := t.ts[:0], t.sendAt[:0]
	defer func() { t.ts, t.sendAt = ts, at }()
	for lo, more := 0, true; more; lo += cr {
		more = false
		half := (lo / cr) % 2
		// The buffer halves this round packs again: their last chunks
		// must have left, waited for together.
		left := t.waits[:0]
		for i, idx := range sendRows {
			if i != me && lo < len(idx) && t.sends[2*i+half] != nil {
				left = append(left, t.sends[2*i+half])
			}
		}
		t.waits = left
		if len(left) > 0 {
			if err := t.waitFor(left...); err != nil {
				return err
			}
		}
		ts, at = ts[:0], at[:0]
		for i, idx := range sendRows {
			if i == me || lo >= len(idx) {
				continue
			}
			more = true
			hi := min(len(idx), lo+cr)
			var buf []byte
			var err error
			switch {
			case sendsWhole(c, own, idx):
				buf = src[lo*rb:]
			case own.dropsAsPacked():
				buf = out[i][half*cr*rb:]
				err = kernels.DropoutGather(own.send, buf, rows, c.width, idx[lo:hi])
			default: // src: the rows, or dropped by the layer below (nextDrops)
				buf = out[i][half*cr*rb:]
				err = kernels.GatherRows(buf, src, idx[lo:hi], rb)
			}
			if err != nil {
				return err
			}
			ts = append(ts, collectives.Transfer{Buf: buf[:(hi-lo)*rb], Peer: i, Tag: tagSparse})
			at = append(at, &t.sends[2*i+half])
			t.sent += int64((hi - lo) * rb)
		}
		if err := t.start(ts, at); err != nil {
			return err
		}
	}
	return nil
}

// useArrived uses this rank's own block first, while the others are still
// on the wire, then waits for each root's rows in turn, makes them its
// cached copy (placing a batch's rows where they belong) and uses the
// block. With a root's rows in, it also waits out its own rows to that
// root, which the root, having sent, has posted for and has taken or is
// taking: while any transfer is in flight the MPI thread probes on the
// core the product runs on, and left to the end of the exchange the sends
// kept it probing through the last block's product, slowing it.
func (x *sparseExchange) useArrived(c *cache, t *transfer, recvRows [][]int32, use func(j int) error) error {
	me, p := x.comm.Rank(), len(t.recvs)
	for k := range p { // ownFirst's order: this rank's block, then the others'
		j := k - 1
		switch {
		case k == 0:
			j = me
		case j >= me:
			j++
		}
		if t.recvs[j] != nil {
			t.waits = append(append(t.waits[:0], t.recvs[j]...), t.sends[2*j:2*j+2]...)
			err := t.waitFor(t.waits...)
			t.recvs[j] = nil
			if err != nil {
				return err
			}
			if recvRows == nil {
				c.arrived(x.be, j, t.bufs[j])
			} else if err = c.scatter(x.be, j, t.bufs[j], recvRows[j]); err != nil {
				return err
			}
		}
		if err := use(j); err != nil {
			return err
		}
	}
	return nil
}

func ones(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = 1
	}
	return o
}

func sum[T int | int64](xs []T) T {
	var s T
	for _, x := range xs {
		s += x
	}
	return s
}

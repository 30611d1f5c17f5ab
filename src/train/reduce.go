package train

// The sparse exchange's transpose. Some backward passes form a neighbour's
// gradient from what only its targets' owner holds exactly: GAT's ∂U_j and
// ∂er_j are sums over targets i of terms in α_ij and G_i. The broadcast
// route sends the targets' gradient rows [G | el | lse | δ] to j's owner,
// which forms the terms. Reducing instead, the targets' owner forms them,
// sums them over its targets for every row of j it holds, and sends j's
// owner those sums, [∂U | ∂er], which it adds to its own: the rows the
// forward exchange moved the other way, narrower (GAT 8×8: 72 values to a
// row, not 88; quantized, ∂er needs no bf16 tail, having its own scale).
//
// It also overlaps more. A rank forms the peers' sums first and sends
// them, then forms its own block's while they are on the wire; the
// broadcast route has only its own block's work to hide its rows behind,
// and each peer's block still to compute once they arrive.
//
// It serves where the sums travel afresh every epoch, whole: the sparse
// exchange, gradients never stale, no cluster batches, no deltas, a fixed
// width (reducesGradients).

import (
	"fmt"
	"time"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/staleness"
)

const tagReduce = collectives.TagUser + 2

// A reducer is a layer that may reduce its gradients: its reduction, or
// nil where it broadcasts them.
type reducer interface{ reduced() *reduction }

// reducesGradients reports whether a layer whose gradients would follow
// policy at the given wire width reduces its backward sums instead of
// broadcasting its gradient rows.
func (e *Engine) reducesGradients(policy staleness.Policy, bits int) bool {
	_, sparse := e.net.x.(*sparseExchange)
	_, never := policy.(staleness.None)
	return e.P > 1 && sparse && never && e.batch == nil && !e.plan.Wire.Delta && bits != wire.Auto
}

// A reduction is one layer's sums through the transpose: per peer j, the
// matrices summed over the rows of j this rank holds, and their encoding.
type reduction struct {
	widths  []int             // the columns of each matrix summed (GAT: h·f, h)
	onBe    []bool            // whether each lives on the backend (else on the host: hostAttention's state)
	parts   [][]*matrix.Dense // parts[j][m]: the sums for root j's rows held (nil: none held)
	bits    int               // the gradient wire's width
	stream  uint64            // keys the rounding, with the seed and the epoch
	rowHash [][]uint64        // rowHash[j]: of root j's rows held, by node id
	enc     [][][]byte        // enc[j][m]: parts[j][m] encoded
	recv    [][][]float32     // recv[i][m]: rank i's sums for this rank's rows, as they travel
	dec     []float32         // one received matrix, decoded
	sends   int               // reductions run, for the results' wire widths
}

func (e *Engine) newReduction(widths []int, onBe []bool, bits int, stream uint64) *reduction {
	r := &reduction{widths: widths, onBe: onBe, bits: bits, stream: stream, parts: make([][]*matrix.Dense, e.P),
		rowHash: make([][]uint64, e.P), enc: make([][][]byte, e.P), recv: make([][][]float32, e.P)}
	for j, n := range e.view.rows {
		r.enc[j], r.recv[j] = make([][]byte, len(widths)), make([][]float32, len(widths))
		if j == e.rank || n == 0 {
			continue
		}
		for m, w := range widths {
			alloc := matrix.NewDense
			if onBe[m] {
				alloc = e.be.NewDense
			}
			r.parts[j] = append(r.parts[j], alloc(n, w))
		}
		if bits != wire.FP32 {
			r.rowHash[j] = make([]uint64, n)
			for k, id := range e.view.ids[j] { // the sparse view's, one per row held
				r.rowHash[j][k] = wire.RowHash(uint64(id))
			}
		}
	}
	return r
}

func (r *reduction) rowBytes(w int) int { return wire.RowBytes(r.bits, w) }

// key keys the rounding of the sums a sender sends in an epoch (with each
// row's hash). It is the sender's too: the ranks that send sums for one row
// round them independently, so their errors do not add up in step.
func (r *reduction) key(seed uint64, epoch, sender int) uint64 {
	return wire.Seed(seed^r.stream^uint64(sender+1)<<32, uint64(epoch))
}

// reduce forms, for every peer j, the sums over the rows of j this rank
// holds (peer(j, out) adds them into out, zeroed), sends them, runs own
// (this rank's own block's share, into dst) while they travel, and adds
// the sums each peer sends for this rank's rows into dst, peers in rank
// order, so the result is the same whatever arrives first.
func (e *Engine) reduce(r *reduction, epoch int, dst []*matrix.Dense, peer func(j int, out []*matrix.Dense) error, own func() error) (err error) {
	x := e.net.x.(*sparseExchange) // reducesGradients
	start, me := time.Now(), e.rank
	t := &transfer{comm: x.comm, recvs: make([][]collectives.Request, e.P)}
	defer func() {
		if err != nil { // leave no transfer writing into or reading our buffers
			for _, q := range t.recvs {
				collectives.WaitAll(q)
			}
			collectives.WaitAll(t.sends)
			err = fmt.Errorf("sparse reduction: %w", err)
		}
		e.tally.clock.wait += t.wait
		e.tally.clock.comm += time.Since(start)
		x.comm.Stats().Add("sparse_reduce", t.sent, t.recvd, time.Since(start))
	}()
	var ts []collectives.Transfer
	var from []int
	for i, rows := range x.sendIdx {
		if i == me || len(rows) == 0 {
			continue
		}
		for m, w := range r.widths {
			n := len(rows) * r.rowBytes(w)
			r.recv[i][m] = grow(r.recv[i][m], (n+3)/4) // floats, to add from as they are
			ts = append(ts, collectives.Transfer{Buf: collectives.Bytes(r.recv[i][m])[:n], Peer: i, Tag: tagReduce, Recv: true})
			from = append(from, i)
			t.recvd += int64(n)
		}
	}
	at := t.recvSlots(from)
	if err := t.start(ts, at); err != nil {
		return err
	}
	key := r.key(e.plan.Optim.Seed, epoch, me)
	r.sends++
	for k := 1; k < e.P; k++ { // each rank's first sums to a different peer
		j := (me + k) % e.P
		out := r.parts[j]
		if out == nil {
			continue
		}
		for m, d := range out {
			if r.onBe[m] {
				e.be.Zero(d)
			} else {
				clear(d.Data)
			}
		}
		if err := peer(j, out); err != nil {
			return err
		}
		r.move(out, e.be.Download)
		ts, at = ts[:0], at[:0]
		for m, d := range out {
			buf := r.encode(j, m, d.Data, key)
			ts = append(ts, collectives.Transfer{Buf: buf, Peer: j, Tag: tagReduce})
			t.sends = append(t.sends, nil)
			t.sent += int64(len(buf))
		}
		for k := range ts {
			at = append(at, &t.sends[len(t.sends)-len(ts)+k])
		}
		if err := t.start(ts, at); err != nil {
			return err
		}
	}
	if err := own(); err != nil {
		return err
	}
	r.move(dst, e.be.Download)
	for i := range e.P { // its own added above, the others by root
		if i == me || t.recvs[i] == nil {
			continue
		}
		err := t.waitFor(t.recvs[i]...)
		t.recvs[i] = nil
		if err != nil {
			return err
		}
		for m, d := range dst {
			if err := r.add(d, r.recv[i][m], x.sendIdx[i], r.widths[m]); err != nil {
				return fmt.Errorf("rank %d's sums: %w", i, err)
			}
		}
	}
	r.move(dst, e.be.Upload)
	return t.waitFor(t.sends...)
}

// move moves those of ds (a matrix per width) that live on the backend
// (Download, Upload); the host's need no move.
func (r *reduction) move(ds []*matrix.Dense, f func(*matrix.Dense)) {
	for m, d := range ds {
		if r.onBe[m] {
			f(d)
		}
	}
}

// encode is the bytes that carry root j's m-th sums, x: the floats
// themselves, or encoded at the reduction's width.
func (r *reduction) encode(j, m int, x []float32, key uint64) []byte {
	if r.bits == wire.FP32 {
		return collectives.Bytes(x)
	}
	w := r.widths[m]
	r.enc[j][m] = grow(r.enc[j][m], len(x)/w*r.rowBytes(w))
	r.dec = grow(r.dec, len(x))
	codecOf(r.bits).Encode(r.enc[j][m], r.dec, x, x, w, key, r.rowHash[j], false, len(x)/w+1)
	return r.enc[j][m]
}

// add adds the sums in buf (as they traveled), one row for each of this rank's rows listed,
// to d.
func (r *reduction) add(d *matrix.Dense, buf []float32, rows []int32, w int) error {
	src := buf
	if r.bits != wire.FP32 {
		r.dec = grow(r.dec, len(rows)*w)
		codecOf(r.bits).Decode(r.dec, collectives.Bytes(buf)[:len(rows)*r.rowBytes(w)], w, false)
		src = r.dec
	}
	return kernels.AddRows(d.Data, src, rows, w)
}

// bytes is what the reduction holds: the sums, their encodings, the
// receive buffers and the hashes that key the rounding.
func (r *reduction) bytes() int64 {
	if r == nil {
		return 0
	}
	n := 4 * int64(len(r.dec))
	for j := range r.parts {
		n += 8 * int64(len(r.rowHash[j]))
		for m := range r.enc[j] {
			n += int64(len(r.enc[j][m])) + 4*int64(len(r.recv[j][m]))
		}
		for _, d := range r.parts[j] {
			n += 4 * int64(len(d.Data))
		}
	}
	return n
}

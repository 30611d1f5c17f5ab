// Package commtest holds the checks every collectives.Comm must pass — the
// in-process World in collectives' tests, MPI in collectives/mpi's under
// mpirun — so both transports run the very same assertions.
package commtest

import (
	"fmt"
	"math"
	"time"

	"sancus/collectives"
)

// Check is one conformance check, run on every rank of a communicator.
type Check struct {
	Name string
	Run  func(c collectives.Comm) error
}

// Checks are the conformance checks, in a fixed order (all ranks must run
// them in one order).
var Checks = []Check{
	{"RingBcastAllRootsUnevenSizes", RingBcastAllRootsUnevenSizes},
	{"SkipBcastPatterns", SkipBcastPatterns},
	{"AllreduceSumsAndAgreesBitwise", AllreduceSumsAndAgreesBitwise},
	{"AllgathervAndAlltoallvUneven", AllgathervAndAlltoallvUneven},
	{"AllreduceBF16SumsAndAgreesBitwise", AllreduceBF16SumsAndAgreesBitwise},
	{"StartAndWaitAllMoveEveryMessage", StartAndWaitAllMoveEveryMessage},
	{"TestedTransfersComplete", TestedTransfersComplete},
}

// TestedTransfersComplete: a transfer whose request is a
// collectives.Tester completes by testing alone, its message whole, and
// a wait after it returns at once. Every rank sends the next one a
// message of a megabyte, large enough to take several tests.
func TestedTransfersComplete(c collectives.Comm) error {
	p, me := c.Size(), c.Rank()
	if p < 2 {
		return nil
	}
	out, in := make([]byte, 1<<20), make([]byte, 1<<20)
	for i := range out {
		out[i] = byte(me*7 + i)
	}
	rq, err := c.Irecv(in, (me+p-1)%p, collectives.TagUser+8)
	if err != nil {
		return err
	}
	sq, err := c.Isend(out, (me+1)%p, collectives.TagUser+8)
	if err != nil {
		return err
	}
	for _, q := range []collectives.Request{rq, sq} {
		if t, ok := q.(collectives.Tester); ok {
			// Napping between tests, as a prober does: ranks outnumbering
			// the cores must leave them to the peers that move the bytes.
			for done := false; !done; time.Sleep(50 * time.Microsecond) {
				if done, err = t.Test(); err != nil {
					return err
				}
			}
		}
		if err := q.Wait(); err != nil {
			return err
		}
	}
	from := (me + p - 1) % p
	for i := range in {
		if in[i] != byte(from*7+i) {
			return fmt.Errorf("rank %d: byte %d from rank %d is %d, want %d", me, i, from, in[i], byte(from*7+i))
		}
	}
	return nil
}

// batchMessages is how many messages each rank sends every peer in
// StartAndWaitAllMoveEveryMessage: more than one, so that order within a
// pair and tag is checked too.
const batchMessages = 16

// StartAndWaitAllMoveEveryMessage: a batch of receives, then a batch of
// sends, every peer batchMessages messages of uneven sizes under one tag,
// all arrive whole and in order, waited for in one batch.
func StartAndWaitAllMoveEveryMessage(c collectives.Comm) error {
	p, me := c.Size(), c.Rank()
	size := func(from, to, k int) int { return 1 + (from*7+to*3+k*5)%41 }
	var recvs, sends []collectives.Transfer
	var want [][]byte
	for peer := range p {
		if peer == me {
			continue
		}
		for k := range batchMessages {
			recvs = append(recvs, collectives.Transfer{Buf: make([]byte, size(peer, me, k)), Peer: peer, Tag: collectives.TagUser + 7, Recv: true})
			exp, out := make([]byte, size(peer, me, k)), make([]byte, size(me, peer, k))
			for i := range exp {
				exp[i] = byte(peer*31 + me*17 + k*13 + i)
			}
			for i := range out {
				out[i] = byte(me*31 + peer*17 + k*13 + i)
			}
			want = append(want, exp)
			sends = append(sends, collectives.Transfer{Buf: out, Peer: peer, Tag: collectives.TagUser + 7})
		}
	}
	reqs := make([]collectives.Request, len(recvs)+len(sends))
	if err := collectives.Start(c, recvs, reqs[:len(recvs)]); err != nil {
		return err
	}
	if err := collectives.Start(c, sends, reqs[len(recvs):]); err != nil {
		return err
	}
	if err := collectives.WaitAllOn(c, reqs); err != nil {
		return err
	}
	for i, r := range recvs {
		if string(r.Buf) != string(want[i]) {
			return fmt.Errorf("rank %d: message %d of %d from rank %d arrived as %v, want %v", me, i%batchMessages, batchMessages, r.Peer, r.Buf, want[i])
		}
	}
	return nil
}

// AllreduceBF16SumsAndAgreesBitwise: the bf16 ring sums to within bf16's
// rounding at every hop, and every rank ends with the same bits.
func AllreduceBF16SumsAndAgreesBitwise(c collectives.Comm) error {
	p := c.Size()
	for _, n := range []int{0, 1, 3, 1000, 100001} {
		buf := make([]float32, n)
		for i := range buf {
			buf[i] = pattern(c.Rank(), i) * 0.001
		}
		if err := collectives.RingAllreduceBF16(c, buf); err != nil {
			return err
		}
		for i, v := range buf {
			var want float64
			for r := 0; r < p; r++ {
				want += float64(pattern(r, i) * 0.001)
			}
			if math.Abs(float64(v)-want) > float64(p)*math.Abs(want)/128+1e-6 {
				return fmt.Errorf("bf16 n=%d: element %d = %g, want %g", n, i, v, want)
			}
		}
		if n > 0 {
			all := make([]float32, p)
			if err := collectives.AllgatherFlags(c, buf[n/2], all); err != nil {
				return err
			}
			for r := range all {
				if math.Float32bits(all[r]) != math.Float32bits(all[0]) {
					return fmt.Errorf("bf16 n=%d: ranks disagree bitwise: %v", n, all)
				}
			}
		}
	}
	return nil
}

func pattern(seed, i int) float32 { return float32(seed*1000003+i*7) / 64 }

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func RingBcastAllRootsUnevenSizes(c collectives.Comm) error {
	for _, n := range []int{0, 1, 5, 4097, 100003} {
		for _, chunk := range []int{7, 1000, collectives.DefaultChunk} {
			if chunk == 7 && n > 4097 {
				continue // 14,287 messages a hop: odd chunks are checked on the sizes below
			}
			for root := 0; root < c.Size(); root++ {
				buf := make([]float32, n)
				for i := range buf {
					if c.Rank() == root {
						buf[i] = pattern(root, i)
					} else {
						buf[i] = -1
					}
				}
				if err := collectives.RingBcast(c, buf, root, chunk); err != nil {
					return err
				}
				for i, v := range buf {
					if v != pattern(root, i) {
						return fmt.Errorf("n=%d chunk=%d root=%d: element %d = %g", n, chunk, root, i, v)
					}
				}
			}
		}
	}
	return nil
}

func SkipBcastPatterns(c collectives.Comm) error {
	p := c.Size()
	// A slice, not a map: every rank must walk the patterns in one order.
	patterns := []struct {
		name string
		act  func(j int) bool
	}{
		{"all-active", func(int) bool { return true }},
		{"all-stale", func(int) bool { return false }},
		{"odd-active", func(j int) bool { return j%2 == 1 }},
	}
	for _, pt := range patterns {
		name, act := pt.name, pt.act
		bufs := make([][]float32, p)
		active := make([]bool, p)
		for j := range bufs {
			bufs[j] = make([]float32, 10+j*3) // uneven block sizes
			active[j] = act(j)
			for i := range bufs[j] {
				if j == c.Rank() {
					bufs[j][i] = pattern(j, i)
				} else {
					bufs[j][i] = -7 // the "cache": must survive a skipped root
				}
			}
		}
		var order []int
		if err := collectives.SkipBcast(c, bufs, active, collectives.Ring(16), func(j int) { order = append(order, j) }); err != nil {
			return err
		}
		for j := range bufs {
			if len(order) != p || order[j] != j {
				return fmt.Errorf("%s: ready order %v", name, order)
			}
			for i, v := range bufs[j] {
				want := pattern(j, i)
				if !active[j] && j != c.Rank() {
					want = -7
				}
				if v != want {
					return fmt.Errorf("%s: root %d element %d = %g, want %g", name, j, i, v, want)
				}
			}
		}
	}
	return nil
}

func AllreduceSumsAndAgreesBitwise(c collectives.Comm) error {
	p := c.Size()
	for _, n := range []int{0, 1, 3, p - 1, 1000, collectives.RingAllreduceMin + 13, 100001} {
		for _, ring := range []bool{false, true} {
			buf := make([]float32, n)
			for i := range buf {
				buf[i] = pattern(c.Rank(), i) * 0.001
			}
			var err error
			if ring {
				err = collectives.RingAllreduce(c, buf)
			} else {
				err = collectives.Allreduce(c, buf)
			}
			if err != nil {
				return err
			}
			for i, v := range buf {
				var want float64
				for r := 0; r < p; r++ {
					want += float64(pattern(r, i) * 0.001)
				}
				if math.Abs(float64(v)-want) > 1e-4*math.Abs(want)+1e-6 {
					return fmt.Errorf("n=%d ring=%v: element %d = %g, want %g", n, ring, i, v, want)
				}
			}
			// Every rank must hold the very same bits, or replicated
			// weights drift apart.
			if n > 0 {
				all := make([]float32, p)
				if err := collectives.AllgatherFlags(c, buf[n-1], all); err != nil {
					return err
				}
				for r := range all {
					if math.Float32bits(all[r]) != math.Float32bits(all[0]) {
						return fmt.Errorf("n=%d ring=%v: ranks disagree bitwise: %v", n, ring, all)
					}
				}
			}
		}
	}
	return nil
}

func AllgathervAndAlltoallvUneven(c collectives.Comm) error {
	p, me := c.Size(), c.Rank()
	counts := make([]int, p)
	for r := range counts {
		counts[r] = (r * 3) % 4 // includes zero-length parts
	}
	send := make([]float32, counts[me])
	for i := range send {
		send[i] = pattern(me, i)
	}
	recv := make([]float32, sum(counts))
	if err := collectives.Allgatherv(c, send, recv, counts); err != nil {
		return err
	}
	off := 0
	for r := 0; r < p; r++ {
		for i := 0; i < counts[r]; i++ {
			if recv[off+i] != pattern(r, i) {
				return fmt.Errorf("allgatherv: rank %d element %d = %g", r, i, recv[off+i])
			}
		}
		off += counts[r]
	}
	// Rank s sends (s+d)%3 values to rank d.
	sc, rc := make([]int, p), make([]int, p)
	for d := 0; d < p; d++ {
		sc[d] = (me + d) % 3
		rc[d] = (d + me) % 3
	}
	out := make([]float32, 0, sum(sc))
	for d := 0; d < p; d++ {
		for i := 0; i < sc[d]; i++ {
			out = append(out, pattern(me*10+d, i))
		}
	}
	in := make([]float32, sum(rc))
	if err := collectives.Alltoallv(c, out, sc, in, rc); err != nil {
		return err
	}
	off = 0
	for s := 0; s < p; s++ {
		for i := 0; i < rc[s]; i++ {
			if in[off+i] != pattern(s*10+me, i) {
				return fmt.Errorf("alltoallv: from %d element %d = %g", s, i, in[off+i])
			}
		}
		off += rc[s]
	}
	// Native broadcast and barrier.
	b := []float32{float32(me), 2, 3}
	if err := collectives.Bcast(c, b, p-1); err != nil {
		return err
	}
	if b[0] != float32(p-1) {
		return fmt.Errorf("bcast: got %v", b)
	}
	return c.Barrier()
}

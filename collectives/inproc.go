package collectives

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// World is a set of in-process ranks (goroutines) joined by channels. It has
// the same semantics as the MPI transport — ordered matching per (source,
// destination, tag), copies on send, timeouts, job-wide abort — so the
// SANCUS engine is tested deterministically without mpirun, and `--ranks N`
// runs on a laptop.
type World struct {
	size    int
	timeout time.Duration

	mu    sync.Mutex
	slots map[slotKey]chan []byte
	sendQ map[pairKey]int // next sequence number per (src, dst, tag)
	recvQ map[pairKey]int

	failOnce sync.Once
	failed   chan struct{}
	failErr  error
}

type pairKey struct{ src, dst, tag int }
type slotKey struct {
	pairKey
	seq int
}

// NewWorld creates size in-process ranks; timeout bounds every wait (0 means
// DefaultTimeout).
func NewWorld(size int, timeout time.Duration) *World {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &World{size: size, timeout: timeout, slots: map[slotKey]chan []byte{},
		sendQ: map[pairKey]int{}, recvQ: map[pairKey]int{}, failed: make(chan struct{})}
}

// Comm returns rank r's endpoint.
func (w *World) Comm(r int) Comm { return &inproc{w: w, rank: r, stats: &Stats{}} }

// Run starts one goroutine per rank running fn and returns the first error.
// An error on one rank aborts the world, so no other rank hangs.
func (w *World) Run(fn func(c Comm) error) error {
	errs := make([]error, w.size)
	var wg sync.WaitGroup
	for r := 0; r < w.size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := w.Comm(r)
			defer func() {
				if p := recover(); p != nil {
					errs[r] = fmt.Errorf("rank %d panicked: %v\n%s", r, p, debug.Stack())
					w.fail(errs[r])
				}
			}()
			if err := fn(c); err != nil {
				errs[r] = err
				w.fail(err)
			}
		}()
	}
	wg.Wait()
	// Report the root cause, not the "peer aborted" echoes on other ranks.
	if w.failErr != nil {
		return w.failErr
	}
	return errors.Join(errs...)
}

func (w *World) fail(err error) {
	w.failOnce.Do(func() {
		w.failErr = err
		close(w.failed)
	})
}

func (w *World) slot(k slotKey) chan []byte {
	ch, ok := w.slots[k]
	if !ok {
		ch = make(chan []byte, 1)
		w.slots[k] = ch
	}
	return ch
}

type inproc struct {
	w     *World
	rank  int
	stats *Stats
}

func (c *inproc) Rank() int     { return c.rank }
func (c *inproc) Size() int     { return c.w.size }
func (c *inproc) Stats() *Stats { return c.stats }
func (c *inproc) Close() error  { return nil }

func (c *inproc) Abort(err error) {
	c.w.fail(&Error{Rank: c.rank, Op: "abort", Err: err})
}

func (c *inproc) checkPeer(peer int, op string) error {
	if peer < 0 || peer >= c.w.size {
		return &Error{Rank: c.rank, Op: op, Err: fmt.Errorf("peer %d outside 0..%d", peer, c.w.size-1)}
	}
	return nil
}

type doneReq struct{}

func (doneReq) Wait() error { return nil }

func (c *inproc) Isend(buf []byte, dst, tag int) (Request, error) {
	if err := c.checkPeer(dst, "send"); err != nil {
		return nil, err
	}
	msg := append(make([]byte, 0, len(buf)), buf...) // eager copy: buf is free at once
	k := pairKey{c.rank, dst, tag}
	c.w.mu.Lock()
	seq := c.w.sendQ[k]
	c.w.sendQ[k] = seq + 1
	ch := c.w.slot(slotKey{k, seq})
	c.w.mu.Unlock()
	ch <- msg // buffered, one message per slot: never blocks
	c.Stats().Sent(1)
	return doneReq{}, nil
}

type recvReq struct {
	c   *inproc
	key slotKey
	ch  chan []byte
	buf []byte
}

func (c *inproc) Irecv(buf []byte, src, tag int) (Request, error) {
	if err := c.checkPeer(src, "recv"); err != nil {
		return nil, err
	}
	k := pairKey{src, c.rank, tag}
	c.w.mu.Lock()
	seq := c.w.recvQ[k]
	c.w.recvQ[k] = seq + 1
	sk := slotKey{k, seq}
	ch := c.w.slot(sk)
	c.w.mu.Unlock()
	return &recvReq{c: c, key: sk, ch: ch, buf: buf}, nil
}

func (r *recvReq) Wait() error {
	if r.ch == nil {
		return nil
	}
	t := time.NewTimer(r.c.w.timeout)
	defer t.Stop()
	select {
	case msg := <-r.ch:
		r.ch = nil
		r.c.w.mu.Lock()
		delete(r.c.w.slots, r.key)
		r.c.w.mu.Unlock()
		if len(msg) != len(r.buf) {
			err := &Error{Rank: r.c.rank, Op: fmt.Sprintf("recv from rank %d", r.key.src),
				Err: fmt.Errorf("message of %d bytes for a buffer of %d", len(msg), len(r.buf))}
			r.c.w.fail(err)
			return err
		}
		copy(r.buf, msg)
		return nil
	case <-r.c.w.failed:
		return &Error{Rank: r.c.rank, Op: fmt.Sprintf("recv from rank %d", r.key.src), Err: fmt.Errorf("job aborted: %w", r.c.w.failErr)}
	case <-t.C:
		err := &Error{Rank: r.c.rank, Op: fmt.Sprintf("recv from rank %d", r.key.src),
			Err: fmt.Errorf("timed out after %v (peer dead or hung?)", r.c.w.timeout)}
		r.c.w.fail(err)
		return err
	}
}

func (c *inproc) Barrier() error { return OpErr(c, "barrier", p2pBarrier(c)) }
func (c *inproc) Bcast(buf []byte, root int) error {
	return OpErr(c, "bcast", p2pBcast(c, buf, root))
}
func (c *inproc) Allreduce(buf []float32) error { return OpErr(c, "allreduce", p2pAllreduce(c, buf)) }
func (c *inproc) Allgatherv(send, recv []byte, counts []int) error {
	return OpErr(c, "allgatherv", p2pAllgatherv(c, send, recv, counts))
}
func (c *inproc) Alltoallv(send []byte, sc []int, recv []byte, rc []int) error {
	return OpErr(c, "alltoallv", p2pAlltoallv(c, send, sc, recv, rc, tagAlltoall))
}

package collectives

import "time"

// DefaultChunk is the smallest automatic ring pipeline chunk in bytes:
// 256 KiB, large enough to amortize per-message cost.
const DefaultChunk = 256 * 1024

// autoChunk picks the pipeline chunk: with two ranks there is nothing to
// pipeline, so the buffer goes as one message (the transport's single-copy
// path); otherwise about 2P chunks, never smaller than DefaultChunk, keep
// every link busy without paying per-message costs thousands of times.
func autoChunk(n, p int) int {
	if p <= 2 {
		return max(n, 1)
	}
	return max(DefaultChunk, (n+2*p-1)/(2*p))
}

// RingBcast broadcasts buf from root around the ring root→root+1→… in
// chunks of chunk elements (0: automatic): each rank forwards chunk c while chunk c+1 is
// still arriving, so a P-rank broadcast costs about one buffer transfer plus
// P−1 chunk latencies, not P−1 buffer transfers. All ranks pass buffers of
// the same length.
func RingBcast[T Word](c Comm, buf []T, root, chunk int) error {
	return ringBcast(c, Bytes(buf), root, chunk*sizeOf[T]())
}

func ringBcast(c Comm, buf []byte, root, chunk int) error {
	p, r := c.Size(), c.Rank()
	if p == 1 || len(buf) == 0 {
		return nil
	}
	if chunk <= 0 {
		chunk = autoChunk(len(buf), p)
	}
	start := time.Now()
	next, prev := (r+1)%p, (r-1+p)%p
	pos := (r - root + p) % p
	chunks := (len(buf) + chunk - 1) / chunk
	part := func(i int) []byte { return buf[i*chunk : min((i+1)*chunk, len(buf))] }
	var sent, recv int64
	var sends []Request
	fail := func(err error) error {
		WaitAll(sends)
		return OpErr(c, "ring broadcast from root "+itoa(root), err)
	}
	if pos == 0 {
		for i := 0; i < chunks; i++ {
			req, err := c.Isend(part(i), next, tagRingBcast)
			if err != nil {
				return fail(err)
			}
			sends = append(sends, req)
		}
		sent = int64(len(buf))
	} else {
		recvs := make([]Request, chunks)
		for i := range recvs {
			req, err := c.Irecv(part(i), prev, tagRingBcast)
			if err != nil {
				return fail(err)
			}
			recvs[i] = req
		}
		forward := pos < p-1
		for i, req := range recvs {
			if err := req.Wait(); err != nil {
				return fail(err)
			}
			if forward {
				s, err := c.Isend(part(i), next, tagRingBcast)
				if err != nil {
					return fail(err)
				}
				sends = append(sends, s)
			}
		}
		recv = int64(len(buf))
		if forward {
			sent = recv
		}
	}
	if err := WaitAll(sends); err != nil {
		return OpErr(c, "ring broadcast from root "+itoa(root), err)
	}
	c.Stats().Add("ring_bcast", sent, recv, time.Since(start))
	return nil
}

// BcastFunc broadcasts buf from root: Ring(chunk) or Native.
type BcastFunc func(c Comm, buf []byte, root int) error

// Ring returns the ring-pipelined broadcast with chunks of chunk bytes (0:
// automatic).
func Ring(chunk int) BcastFunc {
	return func(c Comm, buf []byte, root int) error { return ringBcast(c, buf, root, chunk) }
}

// Native is the transport's own broadcast (MPI_Bcast on MPI).
func Native(c Comm, buf []byte, root int) error {
	if c.Size() == 1 || len(buf) == 0 {
		return nil
	}
	start := time.Now()
	if err := c.Bcast(buf, root); err != nil {
		return OpErr(c, "broadcast from root "+itoa(root), err)
	}
	n := int64(len(buf))
	var sent, recv int64 = 0, n
	if c.Rank() == root {
		sent, recv = n*int64(c.Size()-1), 0 // what the root injects, whatever tree MPI uses
	}
	c.Stats().Add("native_bcast", sent, recv, time.Since(start))
	return nil
}

// SkipBcast runs one ring broadcast per root j = 0..P−1 in order, except for
// roots whose active[j] is false: those send nothing, and every rank knows it
// because all ranks hold the same active vector. bufs[j] is root j's block
// (the source on rank j, the destination elsewhere). ready(j) is called as
// soon as block j is usable, so the caller can compute on it while later
// blocks are still on the wire.
func SkipBcast[T Word](c Comm, bufs [][]T, active []bool, bcast BcastFunc, ready func(j int)) error {
	for j := range bufs {
		if active[j] {
			if err := bcast(c, Bytes(bufs[j]), j); err != nil {
				return err
			}
		} else {
			c.Stats().Add("skip_bcast_skipped", 0, 0, 0)
		}
		if ready != nil {
			ready(j)
		}
	}
	return nil
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

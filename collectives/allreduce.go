package collectives

import "time"

// RingAllreduceMin is the buffer length (float32s) from which Allreduce uses
// the ring (4 MiB): below it the library's own call measured faster here
// (results/bench/comm-*.json), above it the ring keeps every link busy.
const RingAllreduceMin = 1 << 20

// Allreduce sums buf over all ranks in place, choosing the ring algorithm
// for large buffers and the transport's native call for small ones.
func Allreduce(c Comm, buf []float32) error {
	if c.Size() == 1 {
		return nil
	}
	if len(buf) >= RingAllreduceMin {
		return RingAllreduce(c, buf)
	}
	start := time.Now()
	if err := c.Allreduce(buf); err != nil {
		return OpErr(c, "allreduce", err)
	}
	n := int64(len(buf)) * 4
	c.Stats().Add("allreduce", n, n, time.Since(start))
	return nil
}

// RingAllreduce is a bandwidth-optimal sum: a ring reduce-scatter leaves
// segment s fully reduced on one rank, then a ring allgather hands every
// segment to everyone. Each rank sends and receives 2(P−1)/P of the buffer.
// Each segment is summed once, in one order, so all ranks end bit-identical.
func RingAllreduce(c Comm, buf []float32) error {
	p, r := c.Size(), c.Rank()
	if p == 1 || len(buf) == 0 {
		return nil
	}
	start := time.Now()
	seg := func(s int) []float32 {
		s = ((s % p) + p) % p
		return buf[s*len(buf)/p : (s+1)*len(buf)/p]
	}
	next, prev := (r+1)%p, (r-1+p)%p
	maxSeg := (len(buf) + p - 1) / p
	tmp := make([]float32, maxSeg)
	var sent, recv int64
	exchange := func(out, in []float32) error {
		rq, err := Irecv(c, in, prev, tagRingAllreduce)
		if err != nil {
			return err
		}
		sq, err := Isend(c, out, next, tagRingAllreduce)
		if err != nil {
			rq.Wait()
			return err
		}
		sent += int64(len(out)) * 4
		recv += int64(len(in)) * 4
		return WaitAll([]Request{sq, rq})
	}
	// Reduce-scatter: after step s, rank r holds the partial sum of segment
	// r−s−1 over s+2 ranks.
	for s := 0; s < p-1; s++ {
		in := seg(r - s - 1)
		t := tmp[:len(in)]
		if err := exchange(seg(r-s), t); err != nil {
			return OpErr(c, "ring allreduce (reduce-scatter)", err)
		}
		for i, v := range t {
			in[i] += v
		}
	}
	// Allgather: rank r now owns the full sum of segment r+1.
	for s := 0; s < p-1; s++ {
		if err := exchange(seg(r+1-s), seg(r-s)); err != nil {
			return OpErr(c, "ring allreduce (allgather)", err)
		}
	}
	c.Stats().Add("ring_allreduce", sent, recv, time.Since(start))
	return nil
}

// AllgatherFlags shares one small value per rank (a staleness flag): out[j]
// is rank j's mine. It is the "one small allgather per layer" of SANCUS.
func AllgatherFlags[T Word](c Comm, mine T, out []T) error {
	if c.Size() == 1 {
		out[0] = mine
		return nil
	}
	start := time.Now()
	counts := make([]int, c.Size())
	for i := range counts {
		counts[i] = 1
	}
	if err := Allgatherv(c, []T{mine}, out, counts); err != nil {
		return OpErr(c, "allgather flags", err)
	}
	n := int64(sizeOf[T]())
	c.Stats().Add("allgather", n, n*int64(c.Size()-1), time.Since(start))
	return nil
}

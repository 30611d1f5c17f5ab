package collectives

import (
	"time"

	"sancus/collectives/wire"
)

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
func RingAllreduce(c Comm, buf []float32) error { return ringAllreduce(c, buf, false) }

// RingAllreduceBF16 is RingAllreduce with bf16 on the wire, half the bytes
// (PyTorch DDP's bf16 compression hook does the same): every hop rounds the
// partial sum it sends, and each reduced segment is rounded once more
// before the allgather, so all ranks still end bit-identical. Callers keep
// the rounding error and feed it back into the next step.
func RingAllreduceBF16(c Comm, buf []float32) error { return ringAllreduce(c, buf, true) }

func ringAllreduce(c Comm, buf []float32, bf16 bool) error {
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
	var wout, win []uint16
	if bf16 {
		wout, win = make([]uint16, maxSeg), make([]uint16, maxSeg)
	}
	var sent, recv int64
	// exchange sends out to the next rank and receives the previous rank's
	// segment into in.
	exchange := func(out, in []float32) error {
		var rq, sq Request
		var err error
		if bf16 {
			o, i := wout[:len(out)], win[:len(in)]
			for k, v := range out {
				o[k] = wire.ToBF16(v)
			}
			if rq, err = Irecv(c, i, prev, tagRingAllreduce); err == nil {
				if sq, err = Isend(c, o, next, tagRingAllreduce); err != nil {
					rq.Wait()
				}
			}
			sent += int64(len(o)) * 2
			recv += int64(len(i)) * 2
			if err == nil {
				err = WaitAll([]Request{sq, rq})
			}
			for k, v := range i {
				in[k] = wire.FromBF16(v)
			}
			return err
		}
		if rq, err = Irecv(c, in, prev, tagRingAllreduce); err != nil {
			return err
		}
		if sq, err = Isend(c, out, next, tagRingAllreduce); err != nil {
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
	if bf16 { // what the others will receive, this rank keeps too
		for i, v := range seg(r + 1) {
			seg(r + 1)[i] = wire.FromBF16(wire.ToBF16(v))
		}
	}
	for s := 0; s < p-1; s++ {
		if err := exchange(seg(r+1-s), seg(r-s)); err != nil {
			return OpErr(c, "ring allreduce (allgather)", err)
		}
	}
	name := "ring_allreduce"
	if bf16 {
		name = "ring_allreduce_bf16"
	}
	c.Stats().Add(name, sent, recv, time.Since(start))
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

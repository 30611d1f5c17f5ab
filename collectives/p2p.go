package collectives

// Collectives built from point-to-point calls, for transports that have no
// library of their own (the in-process one). They favour clarity: the MPI
// transport uses the library's tuned versions instead.

func offsets(counts []int) []int {
	off := make([]int, len(counts)+1)
	for i, n := range counts {
		off[i+1] = off[i] + n
	}
	return off
}

func p2pBarrier(c Comm) error {
	var empty []byte
	if c.Rank() == 0 {
		var reqs []Request
		for s := 1; s < c.Size(); s++ {
			r, err := c.Irecv(empty, s, tagBarrier)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		if err := WaitAll(reqs); err != nil {
			return err
		}
		reqs = reqs[:0]
		for d := 1; d < c.Size(); d++ {
			r, err := c.Isend(empty, d, tagBarrier)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		return WaitAll(reqs)
	}
	r, err := c.Isend(empty, 0, tagBarrier)
	if err != nil {
		return err
	}
	if err := r.Wait(); err != nil {
		return err
	}
	r, err = c.Irecv(empty, 0, tagBarrier)
	if err != nil {
		return err
	}
	return r.Wait()
}

func p2pBcast(c Comm, buf []byte, root int) error {
	if c.Rank() != root {
		r, err := c.Irecv(buf, root, tagBcast)
		if err != nil {
			return err
		}
		return r.Wait()
	}
	var reqs []Request
	for d := 0; d < c.Size(); d++ {
		if d == root {
			continue
		}
		r, err := c.Isend(buf, d, tagBcast)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	return WaitAll(reqs)
}

// p2pAlltoallv exchanges blocks with every peer.
func p2pAlltoallv(c Comm, send []byte, sendCounts []int, recv []byte, recvCounts []int, tag int) error {
	so := offsets(sendCounts)
	return p2pExchange(c, func(peer int) []byte { return send[so[peer]:so[peer+1]] }, recv, recvCounts, tag)
}

// p2pAllgatherv is Alltoallv where every rank sends the same block to all
// (sent as it is, not copied once per peer).
func p2pAllgatherv(c Comm, send, recv []byte, counts []int) error {
	return p2pExchange(c, func(int) []byte { return send }, recv, counts, tagAllgather)
}

// p2pExchange sends each peer its block and receives each peer's into
// recv (recvCounts bytes from each, in rank order).
func p2pExchange(c Comm, blockFor func(peer int) []byte, recv []byte, recvCounts []int, tag int) error {
	ro := offsets(recvCounts)
	me := c.Rank()
	copy(recv[ro[me]:ro[me+1]], blockFor(me))
	var reqs []Request
	for peer := 0; peer < c.Size(); peer++ {
		if peer == me {
			continue
		}
		r, err := c.Irecv(recv[ro[peer]:ro[peer+1]], peer, tag)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	for peer := 0; peer < c.Size(); peer++ {
		if peer == me {
			continue
		}
		r, err := c.Isend(blockFor(peer), peer, tag)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	return WaitAll(reqs)
}

func p2pAllreduce(c Comm, buf []float32) error {
	p := c.Size()
	all := make([]float32, len(buf)*p)
	counts := make([]int, p)
	for i := range counts {
		counts[i] = len(buf)
	}
	if err := p2pAllgatherv(c, Bytes(buf), Bytes(all), byteCounts[float32](counts)); err != nil {
		return err
	}
	// Sum in rank order so every rank gets the same bits.
	clear(buf)
	for s := 0; s < p; s++ {
		for i, v := range all[s*len(buf) : (s+1)*len(buf)] {
			buf[i] += v
		}
	}
	return nil
}

package collectives

// Transfer is one point-to-point message of a batch: Buf to Peer, or from
// it with Recv, under Tag.
type Transfer struct {
	Buf  []byte
	Peer int
	Tag  int
	Recv bool
}

// Batcher is a Comm that starts a batch of transfers in one hand-off. Over
// MPI every call goes through one thread; an exchange that posted P−1
// messages one at a time paid that hand-off P−1 times.
type Batcher interface {
	StartBatch(ts []Transfer, reqs []Request) error
}

// BatchWaiter is a Comm that waits for a batch of its own requests in one
// hand-off.
type BatchWaiter interface {
	WaitBatch(reqs []Request) error
}

// Start starts every transfer of ts and writes its request to reqs[i]
// (reqs as long as ts): in one hand-off where c is a Batcher, else one by
// one. On an error the requests started so far are in reqs, nil after
// them: the caller waits those out before it reuses their buffers.
func Start(c Comm, ts []Transfer, reqs []Request) error {
	if len(ts) == 0 {
		return nil
	}
	if b, ok := c.(Batcher); ok {
		return b.StartBatch(ts, reqs)
	}
	for i, t := range ts {
		var err error
		if t.Recv {
			reqs[i], err = c.Irecv(t.Buf, t.Peer, t.Tag)
		} else {
			reqs[i], err = c.Isend(t.Buf, t.Peer, t.Tag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// WaitAllOn waits for every request of c in reqs (nil ones are skipped)
// and returns the first error: in one hand-off where c is a BatchWaiter.
func WaitAllOn(c Comm, reqs []Request) error {
	if b, ok := c.(BatchWaiter); ok {
		return b.WaitBatch(reqs)
	}
	return WaitAll(reqs)
}

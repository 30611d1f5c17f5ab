package scaling

import (
	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/src/train"
)

// Traffic is one rank's bytes and messages of one training epoch, as its
// communicator's statistics count them (collectives.Stats): the sparse
// exchanges' rows and the gradient allreduce.
type Traffic struct {
	Sent, Recv         int64 // exchanges and allreduce
	ExchSent, ExchRecv int64 // the exchanges alone
	OffSent, OffRecv   int64 // the exchanges' bytes to and from other nodes
	AllreduceSent      int64
	AllreduceRecv      int64
	Messages           int // point-to-point messages of the exchanges, sent and received
	Exact              bool
}

// RankTraffic is rank r's epoch for flows over counts, with a gradient
// allreduce of params values in the format allreduce.
func RankTraffic(c Counts, r int, flows []train.Flow, params int, allreduce wire.Format) Traffic {
	t := Traffic{Exact: true}
	if c.P == 1 {
		return t
	}
	for _, f := range flows {
		s := c.Ranks[r].Sets[f.Rows]
		sent, recv, sp, rp, os, or := s.SendRows, s.RecvRows, s.SendPeers, s.RecvPeers, s.OffSendRows, s.OffRecvRows
		if f.Reverse {
			sent, recv, sp, rp, os, or = recv, sent, rp, sp, or, os
		}
		rb := int64(f.RowBytes)
		t.ExchSent += sent * rb
		t.ExchRecv += recv * rb
		t.OffSent += os * rb
		t.OffRecv += or * rb
		t.Messages += sp + rp
		t.Exact = t.Exact && f.Exact
	}
	t.AllreduceSent, t.AllreduceRecv = allreduceBytes(c.P, r, params, allreduce)
	t.Sent, t.Recv = t.ExchSent+t.AllreduceSent, t.ExchRecv+t.AllreduceRecv
	return t
}

// allreduceBytes is what collectives.Allreduce (or RingAllreduceBF16)
// records for rank r: the buffer each way below the ring's threshold (the
// transport's own call), else the ring's segments.
func allreduceBytes(p, r, n int, f wire.Format) (sent, recv int64) {
	if p == 1 {
		return 0, 0
	}
	elem := int64(4)
	ring := n >= collectives.RingAllreduceMin
	if f.Or(wire.FP32) == wire.BF16 {
		elem, ring = 2, true
	}
	if !ring {
		return 4 * int64(n), 4 * int64(n)
	}
	seg := func(s int) int64 {
		s = ((s % p) + p) % p
		return int64((s+1)*n/p - s*n/p)
	}
	for s := 0; s < p-1; s++ {
		sent += seg(r-s) + seg(r+1-s)
		recv += seg(r-s-1) + seg(r-s)
	}
	return sent * elem, recv * elem
}

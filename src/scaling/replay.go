package scaling

import (
	"fmt"
	"slices"

	"sancus/src/shard"
	"sancus/src/train"
)

// ReplaySetup loads, one shard at a time, what the replay of rank r of p
// needs: its shard whole and, of every other rank's, what train.PeerOf
// keeps (its block at r's columns, training rows, node ids), so the
// memory held is one shard plus a column block of Â.
func ReplaySetup(load func(i int) (*shard.Shard, error), p, r int) (*shard.Shard, []train.Peer, error) {
	if r < 0 || r >= p {
		return nil, nil, fmt.Errorf("--rank %d outside 0..%d", r, p-1)
	}
	peers := make([]train.Peer, p)
	var own *shard.Shard
	for i := range p {
		s, err := load(i)
		if err != nil {
			return nil, nil, err
		}
		if i == r {
			own = s
			own.AX, own.MX = keepOwn(own.AX), keepOwn(own.MX)
			continue
		}
		peers[i] = train.PeerOf(s, r)
	}
	return own, peers, nil
}

// keepOwn copies a shard's rows of a product out of the whole graph's,
// which an in-memory preparation's shards slice: kept by the replay, the
// slice would keep the whole product (every rank's rows) alive with it.
func keepOwn(a shard.Aggregate) shard.Aggregate {
	if a.CSR != nil {
		c := *a.CSR
		c.ColIdx, c.Val = slices.Clone(c.ColIdx), slices.Clone(c.Val)
		a.CSR = &c
	}
	if a.Dense != nil {
		d := *a.Dense
		d.Data = slices.Clone(d.Data)
		a.Dense = &d
	}
	return a
}

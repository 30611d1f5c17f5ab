package collectives

import (
	"fmt"
	"time"
)

// MeasureLink is the rate, in GB/s per rank, at which every rank sends
// bytes, split evenly over every other rank, and receives as many, all at
// once (the sparse exchange's pattern: every pair busy). It is the best of
// reps rounds, each as long as its slowest rank. A ring would time P of
// the P(P-1) pairs the exchange uses and open only those connections
// before training. Every rank gets the same figure; one rank gets 0.
func MeasureLink(c Comm, bytes, reps int) (float64, error) {
	p := c.Size()
	if p < 2 {
		return 0, nil
	}
	r := c.Rank()
	part := max(1, bytes/(p-1))
	send, recv := make([]byte, part), make([]byte, part*(p-1))
	reqs := make([]Request, 0, 2*(p-1))
	best := time.Duration(1<<63 - 1)
	for range max(1, reps) {
		if err := c.Barrier(); err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
		}
		start := time.Now()
		reqs = reqs[:0]
		for i := 1; i < p; i++ {
			rq, err := c.Irecv(recv[(i-1)*part:i*part], (r+p-i)%p, tagLink)
			if err != nil {
				return 0, fmt.Errorf("measuring the link: %w", err)
			}
			reqs = append(reqs, rq)
		}
		for i := 1; i < p; i++ {
			sq, err := c.Isend(send, (r+i)%p, tagLink)
			if err != nil {
				return 0, fmt.Errorf("measuring the link: %w", err)
			}
			reqs = append(reqs, sq)
		}
		for _, q := range reqs {
			if err := q.Wait(); err != nil {
				return 0, fmt.Errorf("measuring the link: %w", err)
			}
		}
		best = min(best, time.Since(start))
	}
	all, err := Allgather(c, []float64{best.Seconds()})
	if err != nil {
		return 0, fmt.Errorf("measuring the link: %w", err)
	}
	slowest := 0.0
	for _, s := range all {
		slowest = max(slowest, s)
	}
	return float64(part*(p-1)) / slowest / 1e9, nil
}

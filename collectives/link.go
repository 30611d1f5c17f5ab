package collectives

import (
	"fmt"
	"time"
)

// MeasureLink is the rate, in GB/s per rank, at which every rank sends
// bytes to the next and receives as many from the previous at once (the
// exchange's pattern, every link busy): the best of reps rounds, each as
// long as its slowest rank. Every rank gets the same figure; one rank
// gets 0.
func MeasureLink(c Comm, bytes, reps int) (float64, error) {
	p := c.Size()
	if p < 2 {
		return 0, nil
	}
	send, recv := make([]byte, bytes), make([]byte, bytes)
	r := c.Rank()
	best := time.Duration(1<<63 - 1)
	for range max(1, reps) {
		if err := c.Barrier(); err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
		}
		start := time.Now()
		rq, err := c.Irecv(recv, (r+p-1)%p, tagLink)
		if err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
		}
		sq, err := c.Isend(send, (r+1)%p, tagLink)
		if err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
		}
		if err := sq.Wait(); err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
		}
		if err := rq.Wait(); err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
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
	return float64(bytes) / slowest / 1e9, nil
}

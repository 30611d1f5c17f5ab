package collectives

import (
	"fmt"
	"time"
)

// MeasureLink is the rate, in GB/s per rank, at which ranks move bytes
// between pairs, every pair at once: rank r and rank (r+P/2) mod P send
// each other bytes in one message each way (with an odd P the last rank
// sits out). Under block placement on two or more nodes the partner is
// on another node, so the ranks of a node share its uplink as they do in
// the exchange. One large message per pair measures bandwidth: split over
// P−1 peers, P = 512 would send 8 KB messages and time their latency.
//
// A rank waits by testing and napping, never spinning in MPI: ranks
// outnumbering the cores would otherwise take the cores from the pairs
// still moving bytes (TCP between hosts is work on those cores), and the
// probe would time the ranks waiting, not the link.
//
// Rounds repeat until the best has held for three of them (at least 5,
// at most maxRounds; reps raises the minimum): a busy host deschedules a rank
// mid-round, which only slows that round, so the best round is the link's
// rate and the same link gives the same figure from run to run. Before
// timing, every rank sends every other a word, so each connection the
// exchange uses is open before training. Every rank gets the same
// figure; one rank gets 0.
func MeasureLink(c Comm, bytes, reps int) (float64, error) {
	p := c.Size()
	if p < 2 {
		return 0, nil
	}
	if err := openAll(c); err != nil {
		return 0, fmt.Errorf("measuring the link: %w", err)
	}
	r, pairs := c.Rank(), p/2*2
	partner := -1
	if r < pairs {
		partner = (r + pairs/2) % pairs
	}
	send, recv := make([]byte, bytes), make([]byte, bytes)
	best, held := time.Duration(0), 0 // 0: no round yet
	for round := 0; round < maxRounds && (round < max(5, reps) || held < 3); round++ {
		if err := idleBarrier(c); err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
		}
		start := time.Now()
		if partner >= 0 {
			if err := swap(c, send, recv, partner, waitIdle); err != nil {
				return 0, fmt.Errorf("measuring the link: %w", err)
			}
		}
		t := time.Since(start)
		if partner < 0 {
			t = 0 // the odd rank out times nothing
		}
		// Every rank is done before the allgather, which then spins little.
		if err := idleBarrier(c); err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
		}
		all, err := Allgather(c, []float64{t.Seconds()})
		if err != nil {
			return 0, fmt.Errorf("measuring the link: %w", err)
		}
		slowest := 0.0
		for _, s := range all {
			slowest = max(slowest, s)
		}
		// A round counts as its slowest pair: ranks agree on every figure.
		if d := time.Duration(slowest * float64(time.Second)); best == 0 || 10*d < 9*best {
			best, held = d, 0
		} else {
			best, held = min(best, d), held+1
		}
	}
	return float64(bytes) / best.Seconds() / 1e9, nil
}

// MeasureLatency is the time, in µs, a word takes between the pairs of
// MeasureLink, every pair at once: the least over rounds of the slowest
// pair's mean over a round of exchanges. It is measured apart from the
// rate, which large messages time: at P = 512 an exchange's messages are
// small and their count, not their bytes, sets its time. Ranks wait in
// Wait here, since a nap would be longer than the word. Every rank gets
// the same figure; one rank gets 0.
func MeasureLatency(c Comm, rounds int) (float64, error) {
	p := c.Size()
	if p < 2 {
		return 0, nil
	}
	r, pairs := c.Rank(), p/2*2
	word, got := make([]byte, 8), make([]byte, 8)
	best := 0.0
	for range max(1, rounds) {
		if err := idleBarrier(c); err != nil {
			return 0, fmt.Errorf("measuring the latency: %w", err)
		}
		start := time.Now()
		if r < pairs {
			for range latencyWords {
				if err := swap(c, word, got, (r+pairs/2)%pairs, WaitAll); err != nil {
					return 0, fmt.Errorf("measuring the latency: %w", err)
				}
			}
		}
		us := time.Since(start).Seconds() * 1e6 / latencyWords
		if r >= pairs {
			us = 0
		}
		all, err := Allgather(c, []float64{us})
		if err != nil {
			return 0, fmt.Errorf("measuring the latency: %w", err)
		}
		slowest := 0.0
		for _, u := range all {
			slowest = max(slowest, u)
		}
		if best == 0 || slowest < best {
			best = slowest
		}
	}
	return best, nil
}

// latencyWords is how many exchanges of a word a latency round times.
const latencyWords = 32

// maxRounds bounds the link's measurement on a host too busy to give
// three rounds alike: about 2 s of 4 MB rounds at 1 Gbit/s shared by two.
const maxRounds = 24

// swap sends send to peer and receives recv from it at once, waiting by
// wait (waitIdle, or WaitAll where a nap would outlast the message).
func swap(c Comm, send, recv []byte, peer int, wait func([]Request) error) error {
	rq, err := c.Irecv(recv, peer, tagLink)
	if err != nil {
		return err
	}
	sq, err := c.Isend(send, peer, tagLink)
	if err != nil {
		return err
	}
	return wait([]Request{rq, sq})
}

// waitIdle waits for every request, testing a Tester between naps and
// waiting for any other.
func waitIdle(reqs []Request) error {
	for _, q := range reqs {
		t, ok := q.(Tester)
		if !ok {
			if err := q.Wait(); err != nil {
				return err
			}
			continue
		}
		for {
			done, err := t.Test()
			if err != nil {
				return err
			}
			if done {
				break
			}
			time.Sleep(idleNap)
		}
	}
	return nil
}

// idleNap is short next to a probe's message (4 MB take 3 ms at 10
// Gbit/s) and long next to a test's hand-off to the MPI thread.
const idleNap = 50 * time.Microsecond

// idleBarrier is a barrier whose ranks wait by waitIdle: a dissemination
// barrier, a word to rank r+2^k and from r−2^k in round k.
func idleBarrier(c Comm) error {
	p, r := c.Size(), c.Rank()
	word, got := make([]byte, 1), make([]byte, 1)
	for k := 1; k < p; k *= 2 {
		rq, err := c.Irecv(got, (r-k+p)%p, tagLinkBarrier)
		if err != nil {
			return err
		}
		sq, err := c.Isend(word, (r+k)%p, tagLinkBarrier)
		if err != nil {
			return err
		}
		if err := waitIdle([]Request{rq, sq}); err != nil {
			return err
		}
	}
	return nil
}

// openAll sends every other rank a word and receives one from each.
func openAll(c Comm) error {
	p, r := c.Size(), c.Rank()
	word := make([]byte, 8)
	got := make([]byte, 8*p)
	reqs := make([]Request, 0, 2*(p-1))
	for i := 1; i < p; i++ {
		q, err := c.Irecv(got[8*i:8*i+8], (r+p-i)%p, tagLink)
		if err != nil {
			return err
		}
		reqs = append(reqs, q)
	}
	for i := 1; i < p; i++ {
		q, err := c.Isend(word, (r+i)%p, tagLink)
		if err != nil {
			return err
		}
		reqs = append(reqs, q)
	}
	return waitIdle(reqs)
}

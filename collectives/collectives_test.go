package collectives_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "sancus/collectives"
	"sancus/collectives/commtest"
)

// TestConformance runs every transport check on in-process worlds of 1–4
// ranks (collectives/mpi runs the same checks under mpirun).
func TestConformance(t *testing.T) {
	for _, ck := range commtest.Checks {
		t.Run(ck.Name, func(t *testing.T) {
			for p := 1; p <= 4; p++ {
				if err := NewWorld(p, 20*time.Second).Run(ck.Run); err != nil {
					t.Fatalf("in-process P=%d: %v", p, err)
				}
			}
		})
	}
}

func TestRingBcastAccounting(t *testing.T) {
	err := NewWorld(4, 5*time.Second).Run(func(c Comm) error {
		buf := make([]float32, 1000)
		if err := RingBcast(c, buf, 1, 64); err != nil {
			return err
		}
		s := c.Stats().Snapshot()["ring_bcast"]
		var wantSent, wantRecv int64 = 4000, 4000
		switch c.Rank() {
		case 1: // root
			wantRecv = 0
		case 0: // last in the ring 1→2→3→0
			wantSent = 0
		}
		if s.BytesSent != wantSent || s.BytesRecv != wantRecv || s.Calls != 1 {
			return fmt.Errorf("rank %d: stats %+v, want sent %d recv %d", c.Rank(), s, wantSent, wantRecv)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The timeout is an hour, so only the abort can end the waiting ranks
// within the test's 2 minutes, however slow the machine.
func TestInprocFailureReachesEveryRank(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		done <- NewWorld(3, time.Hour).Run(func(c Comm) error {
			if c.Rank() == 2 {
				return fmt.Errorf("shard is corrupt")
			}
			return RingBcast(c, make([]float32, 10), 2, 4) // waits on rank 2 forever
		})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "shard is corrupt") {
			t.Fatalf("want the failing rank's error, got %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the ranks still wait 2 minutes after one failed: the failure did not reach them")
	}
}

func TestInprocTimeoutNamesRankAndOp(t *testing.T) {
	err := NewWorld(2, 200*time.Millisecond).Run(func(c Comm) error {
		if c.Rank() == 0 {
			r, _ := c.Irecv(make([]byte, 4), 1, 5)
			return r.Wait()
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), "recv from rank 1") || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("want a timeout naming rank 0 and its peer, got %v", err)
	}
}

func TestInprocSizeMismatchIsAnError(t *testing.T) {
	err := NewWorld(2, time.Second).Run(func(c Comm) error {
		if c.Rank() == 0 {
			r, _ := c.Isend(make([]byte, 3), 1, 9)
			return r.Wait()
		}
		r, _ := c.Irecv(make([]byte, 2), 0, 9)
		return r.Wait()
	})
	if err == nil || !strings.Contains(err.Error(), "3 bytes for a buffer of 2") {
		t.Fatalf("got %v", err)
	}
}

// MeasureLink: every rank gets one positive rate, the same on every rank,
// having opened a connection to every other rank, as the sparse exchange
// uses them, and sent its partner the measured bytes in one message; one
// rank measures nothing.
func TestMeasureLink(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4} {
		rates := make([]float64, p)
		sentTo, bigTo := make([]map[int]int, p), make([]map[int]int, p)
		err := NewWorld(p, 5*time.Second).Run(func(c Comm) error {
			rc := &sendCounter{Comm: c, to: map[int]int{}, big: map[int]int{}}
			g, err := MeasureLink(rc, 1<<20, 3)
			rates[c.Rank()], sentTo[c.Rank()], bigTo[c.Rank()] = g, rc.to, rc.big
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for r, g := range rates {
			if (p == 1) != (g == 0) || g < 0 || g != rates[0] {
				t.Fatalf("P=%d: rank %d measured %v GB/s, rank 0 %v", p, r, g, rates[0])
			}
			for q := range p {
				if q != r && sentTo[r][q] == 0 {
					t.Errorf("P=%d: rank %d sent nothing to rank %d (sent to %v)", p, r, q, sentTo[r])
				}
			}
			if pairs := p / 2 * 2; r < pairs {
				if big := bigTo[r][(r+pairs/2)%pairs]; big < 3 {
					t.Errorf("P=%d: rank %d sent its partner %d large messages, want one a round, 3 or more", p, r, big)
				}
			}
		}
	}
}

// sendCounter counts a rank's sends of the link's test messages (a KiB or
// more, unlike the collectives' words around them), by destination.
type sendCounter struct {
	Comm
	to, big map[int]int
}

func (s *sendCounter) Isend(buf []byte, dst, tag int) (Request, error) {
	if tag == TagLink {
		s.to[dst]++
		if len(buf) >= 1<<10 {
			s.big[dst]++
		}
	}
	return s.Comm.Isend(buf, dst, tag)
}

// MeasureLink waits for its transfers by testing them, never in a Wait
// that a transport like MPI spins in: ranks outnumbering the cores would
// take them from the pairs still moving bytes.
func TestMeasureLinkWaitsByTesting(t *testing.T) {
	const p = 4
	tests, waits := make([]int, p), make([]int, p)
	err := NewWorld(p, 5*time.Second).Run(func(c Comm) error {
		tc := &testingComm{Comm: c, tests: &tests[c.Rank()], waits: &waits[c.Rank()]}
		_, err := MeasureLink(tc, 1<<16, 3)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range p {
		if waits[r] != 0 || tests[r] == 0 {
			t.Errorf("rank %d: %d waits and %d tests of the probe's transfers, want only tests", r, waits[r], tests[r])
		}
	}
}

// testingComm hands out Testers of the probe's transfers (tags from
// TagLink up to TagUser), counting their tests and waits.
type testingComm struct {
	Comm
	tests, waits *int
}

func (c *testingComm) wrap(q Request, tag int, err error) (Request, error) {
	if err != nil || tag < TagLink || tag >= TagUser {
		return q, err
	}
	return &countedTester{q, c}, nil
}

func (c *testingComm) Isend(buf []byte, dst, tag int) (Request, error) {
	q, err := c.Comm.Isend(buf, dst, tag)
	return c.wrap(q, tag, err)
}

func (c *testingComm) Irecv(buf []byte, src, tag int) (Request, error) {
	q, err := c.Comm.Irecv(buf, src, tag)
	return c.wrap(q, tag, err)
}

// countedTester completes at its first test (the in-process transport's
// Wait returns once the message is there).
type countedTester struct {
	Request
	c *testingComm
}

func (q *countedTester) Test() (bool, error) { *q.c.tests++; return true, q.Request.Wait() }
func (q *countedTester) Wait() error         { *q.c.waits++; return q.Request.Wait() }

// MeasureLatency: every rank gets one positive time, the same on every
// rank; one rank measures nothing.
func TestMeasureLatency(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4} {
		us := make([]float64, p)
		err := NewWorld(p, 5*time.Second).Run(func(c Comm) error {
			u, err := MeasureLatency(c, 3)
			us[c.Rank()] = u
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for r, u := range us {
			if (p == 1) != (u == 0) || u < 0 || u != us[0] {
				t.Fatalf("P=%d: rank %d measured %v µs, rank 0 %v", p, r, u, us[0])
			}
		}
	}
}

package collectives

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mpiComm is set when the test binary runs under mpirun
// (go test -exec "mpirun -np 4" ./collectives): then every test also runs
// over real MPI with the launcher's rank count.
var mpiComm *MPI

func underMPI() bool {
	return os.Getenv("OMPI_COMM_WORLD_SIZE") != "" || os.Getenv("PMIX_RANK") != ""
}

func TestMain(m *testing.M) {
	if underMPI() && os.Getenv("SANCUS_TEST_DIE") == "" {
		c, err := StartMPI(60 * time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		mpiComm = c
		code := m.Run()
		// A failed rank must not leave the others in Finalize: abort instead.
		if code != 0 {
			c.Abort(fmt.Errorf("tests failed"))
		}
		c.Close()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// onAll runs fn on in-process worlds of 1–4 ranks and, under mpirun, on the
// MPI world.
func onAll(t *testing.T, fn func(c Comm) error) {
	t.Helper()
	for p := 1; p <= 4; p++ {
		if err := NewWorld(p, 20*time.Second).Run(fn); err != nil {
			t.Fatalf("in-process P=%d: %v", p, err)
		}
	}
	if mpiComm != nil {
		if err := fn(mpiComm); err != nil {
			t.Fatalf("MPI P=%d rank %d: %v", mpiComm.Size(), mpiComm.Rank(), err)
		}
	}
}

func pattern(seed, i int) float32 { return float32(seed*1000003+i*7) / 64 }

func TestRingBcastAllRootsUnevenSizes(t *testing.T) {
	onAll(t, func(c Comm) error {
		for _, n := range []int{0, 1, 5, 4097, 100003} {
			for _, chunk := range []int{7, 1000, DefaultChunk} {
				for root := 0; root < c.Size(); root++ {
					buf := make([]float32, n)
					for i := range buf {
						if c.Rank() == root {
							buf[i] = pattern(root, i)
						} else {
							buf[i] = -1
						}
					}
					if err := RingBcast(c, buf, root, chunk); err != nil {
						return err
					}
					for i, v := range buf {
						if v != pattern(root, i) {
							return fmt.Errorf("n=%d chunk=%d root=%d: element %d = %g", n, chunk, root, i, v)
						}
					}
				}
			}
		}
		return nil
	})
}

func TestSkipBcastPatterns(t *testing.T) {
	onAll(t, func(c Comm) error {
		p := c.Size()
		// A slice, not a map: every rank must walk the patterns in one order.
		patterns := []struct {
			name string
			act  func(j int) bool
		}{
			{"all-active", func(int) bool { return true }},
			{"all-stale", func(int) bool { return false }},
			{"odd-active", func(j int) bool { return j%2 == 1 }},
		}
		for _, pt := range patterns {
			name, act := pt.name, pt.act
			bufs := make([][]float32, p)
			active := make([]bool, p)
			for j := range bufs {
				bufs[j] = make([]float32, 10+j*3) // uneven block sizes
				active[j] = act(j)
				for i := range bufs[j] {
					if j == c.Rank() {
						bufs[j][i] = pattern(j, i)
					} else {
						bufs[j][i] = -7 // the "cache": must survive a skipped root
					}
				}
			}
			var order []int
			if err := SkipBcast(c, bufs, active, Ring(4), func(j int) { order = append(order, j) }); err != nil {
				return err
			}
			for j := range bufs {
				if len(order) != p || order[j] != j {
					return fmt.Errorf("%s: ready order %v", name, order)
				}
				for i, v := range bufs[j] {
					want := pattern(j, i)
					if !active[j] && j != c.Rank() {
						want = -7
					}
					if v != want {
						return fmt.Errorf("%s: root %d element %d = %g, want %g", name, j, i, v, want)
					}
				}
			}
		}
		return nil
	})
}

func TestAllreduceSumsAndAgreesBitwise(t *testing.T) {
	onAll(t, func(c Comm) error {
		p := c.Size()
		for _, n := range []int{0, 1, 3, p - 1, 1000, RingAllreduceMin + 13, 100001} {
			for _, ring := range []bool{false, true} {
				buf := make([]float32, n)
				for i := range buf {
					buf[i] = pattern(c.Rank(), i) * 0.001
				}
				var err error
				if ring {
					err = RingAllreduce(c, buf)
				} else {
					err = Allreduce(c, buf)
				}
				if err != nil {
					return err
				}
				for i, v := range buf {
					var want float64
					for r := 0; r < p; r++ {
						want += float64(pattern(r, i) * 0.001)
					}
					if math.Abs(float64(v)-want) > 1e-4*math.Abs(want)+1e-6 {
						return fmt.Errorf("n=%d ring=%v: element %d = %g, want %g", n, ring, i, v, want)
					}
				}
				// Every rank must hold the very same bits, or replicated
				// weights drift apart.
				if n > 0 {
					all := make([]float32, p)
					if err := AllgatherFlags(c, buf[n-1], all); err != nil {
						return err
					}
					for r := range all {
						if math.Float32bits(all[r]) != math.Float32bits(all[0]) {
							return fmt.Errorf("n=%d ring=%v: ranks disagree bitwise: %v", n, ring, all)
						}
					}
				}
			}
		}
		return nil
	})
}

func TestAllgathervAndAlltoallvUneven(t *testing.T) {
	onAll(t, func(c Comm) error {
		p, me := c.Size(), c.Rank()
		counts := make([]int, p)
		for r := range counts {
			counts[r] = (r * 3) % 4 // includes zero-length parts
		}
		send := make([]float32, counts[me])
		for i := range send {
			send[i] = pattern(me, i)
		}
		recv := make([]float32, sum(counts))
		if err := c.Allgatherv(send, recv, counts); err != nil {
			return err
		}
		off := 0
		for r := 0; r < p; r++ {
			for i := 0; i < counts[r]; i++ {
				if recv[off+i] != pattern(r, i) {
					return fmt.Errorf("allgatherv: rank %d element %d = %g", r, i, recv[off+i])
				}
			}
			off += counts[r]
		}
		// Rank s sends (s+d)%3 values to rank d.
		sc, rc := make([]int, p), make([]int, p)
		for d := 0; d < p; d++ {
			sc[d] = (me + d) % 3
			rc[d] = (d + me) % 3
		}
		out := make([]float32, 0, sum(sc))
		for d := 0; d < p; d++ {
			for i := 0; i < sc[d]; i++ {
				out = append(out, pattern(me*10+d, i))
			}
		}
		in := make([]float32, sum(rc))
		if err := c.Alltoallv(out, sc, in, rc); err != nil {
			return err
		}
		off = 0
		for s := 0; s < p; s++ {
			for i := 0; i < rc[s]; i++ {
				if in[off+i] != pattern(s*10+me, i) {
					return fmt.Errorf("alltoallv: from %d element %d = %g", s, i, in[off+i])
				}
			}
			off += rc[s]
		}
		// Native broadcast and barrier.
		b := []float32{float32(me), 2, 3}
		if err := c.Bcast(b, p-1); err != nil {
			return err
		}
		if b[0] != float32(p-1) {
			return fmt.Errorf("bcast: got %v", b)
		}
		return c.Barrier()
	})
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
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

func TestInprocFailureReachesEveryRank(t *testing.T) {
	start := time.Now()
	err := NewWorld(3, 10*time.Second).Run(func(c Comm) error {
		if c.Rank() == 2 {
			return fmt.Errorf("shard is corrupt")
		}
		return RingBcast(c, make([]float32, 10), 2, 4) // waits on rank 2 forever
	})
	if err == nil || !strings.Contains(err.Error(), "shard is corrupt") {
		t.Fatalf("want the failing rank's error, got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("abort took %v: ranks waited for the timeout instead", time.Since(start))
	}
}

func TestInprocTimeoutNamesRankAndOp(t *testing.T) {
	err := NewWorld(2, 200*time.Millisecond).Run(func(c Comm) error {
		if c.Rank() == 0 {
			r, _ := c.Irecv(make([]float32, 1), 1, 5)
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
			r, _ := c.Isend(make([]float32, 3), 1, 9)
			return r.Wait()
		}
		r, _ := c.Irecv(make([]float32, 2), 0, 9)
		return r.Wait()
	})
	if err == nil || !strings.Contains(err.Error(), "3 values for a buffer of 2") {
		t.Fatalf("got %v", err)
	}
}

// TestHelperDie is the body of TestRankDeathAbortsJob: under mpirun, rank 1
// kills itself in the middle of a ring broadcast.
func TestHelperDie(t *testing.T) {
	if os.Getenv("SANCUS_TEST_DIE") == "" {
		t.Skip("helper for TestRankDeathAbortsJob")
	}
	c, err := StartMPI(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, 1<<20)
	for it := 0; ; it++ {
		if c.Rank() == 1 && it == 3 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		if err := RingBcast(c, buf, 0, 1024); err != nil {
			c.Abort(err)
		}
	}
}

func TestRankDeathAbortsJob(t *testing.T) {
	if underMPI() {
		t.Skip("starts its own mpirun")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not installed")
	}
	start := time.Now()
	cmd := exec.Command(mpirun, "--oversubscribe", "-np", "3", os.Args[0], "-test.run", "^TestHelperDie$")
	cmd.Env = append(os.Environ(), "SANCUS_TEST_DIE=1", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err == nil {
		t.Fatalf("job with a dead rank exited 0:\n%s", out)
	}
	if took > 30*time.Second {
		t.Fatalf("job took %v to exit after a rank died", took)
	}
	if !strings.Contains(string(out), "rank 1") && !strings.Contains(string(out), "rank 1 with PID") {
		t.Fatalf("output does not name the dead rank:\n%s", out)
	}
	t.Logf("exited after %v: %v", took.Round(time.Millisecond), err)
}

// TestMPISplit: under mpirun, even and odd ranks form two communicators in
// which collectives see only their own members.
func TestMPISplit(t *testing.T) {
	if mpiComm == nil {
		t.Skip("needs mpirun")
	}
	r := mpiComm.Rank()
	sub, err := mpiComm.Split(r%2, r)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	want := (mpiComm.Size() + 1 - r%2) / 2
	if sub.Size() != want || sub.Rank() != r/2 {
		t.Fatalf("rank %d: split gives rank %d of %d, want %d of %d", r, sub.Rank(), sub.Size(), r/2, want)
	}
	buf := []float32{float32(r)}
	if err := RingAllreduce(sub, buf); err != nil {
		t.Fatal(err)
	}
	var sum float32
	for q := r % 2; q < mpiComm.Size(); q += 2 {
		sum += float32(q)
	}
	if buf[0] != sum {
		t.Fatalf("rank %d: allreduce over its half = %g, want %g", r, buf[0], sum)
	}
}

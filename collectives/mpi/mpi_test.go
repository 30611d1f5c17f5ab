package mpi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sancus/collectives"
	"sancus/collectives/commtest"
	"sancus/collectives/mpi"
)

// mpiComm is set when the test binary runs under mpirun
// (go test -exec "mpirun -np 4" ./collectives/mpi): the conformance checks
// then run over real MPI with the launcher's rank count.
var mpiComm *mpi.Comm

func underMPI() bool {
	return os.Getenv("OMPI_COMM_WORLD_SIZE") != "" || os.Getenv("PMIX_RANK") != ""
}

func TestMain(m *testing.M) {
	if underMPI() && os.Getenv("SANCUS_TEST_DIE") == "" {
		c, err := mpi.Start(60 * time.Second)
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
	// The mpirun this package starts makes its session directory in a
	// TMPDIR of its own, not racing the other packages' (open-mpi/ompi#8510).
	dir, err := os.MkdirTemp("", "sancus-mpi-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestConformance runs every transport check over the MPI world.
func TestConformance(t *testing.T) {
	if mpiComm == nil {
		t.Skip("needs mpirun (make test-mpi)")
	}
	// With probes while transfers are in flight, and with none: messages
	// then move only inside the waits; waiting in MPI's blocking calls, and
	// testing and napping with the nonblocking collectives.
	defer mpiComm.SetNap(0)
	for _, nap := range []time.Duration{0, 50 * time.Microsecond} {
		if err := mpiComm.SetNap(nap); err != nil {
			t.Fatal(err)
		}
		for _, every := range []time.Duration{200 * time.Microsecond, 0} {
			if err := mpiComm.SetProgress(every); err != nil {
				t.Fatal(err)
			}
			for _, ck := range commtest.Checks {
				if err := ck.Run(mpiComm); err != nil {
					t.Fatalf("%s, napping %v, probing every %v: MPI P=%d rank %d: %v", ck.Name, nap, every, mpiComm.Size(), mpiComm.Rank(), err)
				}
			}
		}
	}
}

// napping runs f with the MPI thread spinning, then napping between tests.
func napping(t *testing.T, f func(t *testing.T)) {
	defer mpiComm.SetNap(0)
	for _, nap := range []time.Duration{0, 50 * time.Microsecond} {
		if err := mpiComm.SetNap(nap); err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("nap=%v", nap), f)
	}
}

// TestNoHwlocDisplayPlugins checks that MPI_Init left hwloc's display,
// OpenCL and libxml2 plugins unloaded (skipHwlocPlugins), where Debian's
// libhwloc-plugins installs them. Only ranks that build the topology
// themselves load plugins: under make test-mpi, those of -np 4 on two
// cores (oversubscribed, unbound); bound ranks take mpirun's.
func TestNoHwlocDisplayPlugins(t *testing.T) {
	if mpiComm == nil {
		t.Skip("needs mpirun (make test-mpi)")
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	if !strings.Contains(string(maps), "libhwloc") {
		t.Skip("hwloc is not loaded")
	}
	installed := 0
	for _, p := range strings.Split("hwloc_gl,hwloc_opencl,hwloc_xml_libxml", ",") {
		if m, _ := filepath.Glob("/usr/lib/*/hwloc/" + p + ".so"); len(m) > 0 {
			installed++
			if strings.Contains(string(maps), "/"+p+".so") {
				t.Errorf("rank %d: hwloc loaded %s.so", mpiComm.Rank(), p)
			}
		}
	}
	if installed == 0 {
		t.Skip("no hwloc plugins installed")
	}
}

// TestHelperDie is the body of TestRankDeathAbortsJob: under mpirun, rank 1
// kills itself in the middle of a ring broadcast.
func TestHelperDie(t *testing.T) {
	if os.Getenv("SANCUS_TEST_DIE") == "" {
		t.Skip("helper for TestRankDeathAbortsJob")
	}
	// An hour: only mpirun noticing the death can end the job in the
	// test's 2 minutes, not a peer's timeout.
	c, err := mpi.Start(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, 1<<20)
	for it := 0; ; it++ {
		if c.Rank() == 1 && it == 3 {
			fmt.Printf("rank 1 dies at %d\n", time.Now().UnixNano())
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		if err := collectives.RingBcast(c, buf, 0, 1024); err != nil {
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "--oversubscribe", "-np", "3", os.Args[0], "-test.run", "^TestHelperDie$")
	cmd.Env = append(os.Environ(), "SANCUS_TEST_DIE=1", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	cmd.WaitDelay = 5 * time.Second
	// The ranks wait an hour for a dead peer: past the bound, kill them
	// with mpirun, the whole process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	end := time.Now()
	if ctx.Err() != nil {
		t.Fatalf("the job still ran 2 minutes after it started, with a rank dead:\n%s", out)
	}
	if err == nil {
		t.Fatalf("job with a dead rank exited 0:\n%s", out)
	}
	// Timed from the death, not from mpirun's start: starting three ranks
	// on a loaded two-core machine can itself take tens of seconds.
	m := regexp.MustCompile(`rank 1 dies at (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("rank 1 did not report its death:\n%s", out)
	}
	ns, _ := strconv.ParseInt(string(m[1]), 10, 64)
	took := end.Sub(time.Unix(0, ns))
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
	if err := collectives.RingAllreduce(sub, buf); err != nil {
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

// TestOneHandoffPerBatch: a batch of transfers starts in one hand-off to
// the MPI thread, and is waited for in one, however many messages it
// holds: 16 to and from every peer here.
func TestOneHandoffPerBatch(t *testing.T) {
	if mpiComm == nil {
		t.Skip("needs mpirun (make test-mpi)")
	}
	napping(t, oneHandoffPerBatch)
}

func oneHandoffPerBatch(t *testing.T) {
	p, me := mpiComm.Size(), mpiComm.Rank()
	if p < 2 {
		t.Skip("needs 2 or more ranks")
	}
	var ts []collectives.Transfer
	for peer := range p {
		if peer == me {
			continue
		}
		for range 16 {
			ts = append(ts, collectives.Transfer{Buf: make([]byte, 64), Peer: peer, Tag: collectives.TagUser + 9, Recv: true})
		}
		for range 16 {
			ts = append(ts, collectives.Transfer{Buf: make([]byte, 64), Peer: peer, Tag: collectives.TagUser + 9})
		}
	}
	reqs := make([]collectives.Request, len(ts))
	before := mpiComm.Handoffs()
	if err := collectives.Start(mpiComm, ts, reqs); err != nil {
		t.Fatal(err)
	}
	if err := collectives.WaitAllOn(mpiComm, reqs); err != nil {
		t.Fatal(err)
	}
	if n := mpiComm.Handoffs() - before; n != 2 {
		t.Fatalf("%d transfers took %d hand-offs to the MPI thread, want 2", len(ts), n)
	}
}

// TestFailedBatchWaitWaitsTheRest: a batch whose first wait fails (a
// message longer than its buffer) still waits for every other request
// before it returns, so no transfer is left writing into a buffer its
// owner has given up: waiting again costs no hand-off.
func TestFailedBatchWaitWaitsTheRest(t *testing.T) {
	if mpiComm == nil {
		t.Skip("needs mpirun (make test-mpi)")
	}
	napping(t, failedBatchWaitWaitsTheRest)
}

func failedBatchWaitWaitsTheRest(t *testing.T) {
	if mpiComm.Size() < 2 {
		t.Skip("needs 2 or more ranks")
	}
	const tag = collectives.TagUser + 13
	switch mpiComm.Rank() {
	case 0:
		ts := []collectives.Transfer{{Buf: make([]byte, 64), Peer: 1, Tag: tag, Recv: true}, {Buf: make([]byte, 64), Peer: 1, Tag: tag, Recv: true}}
		reqs := make([]collectives.Request, 2)
		if err := collectives.Start(mpiComm, ts, reqs); err != nil {
			t.Fatal(err)
		}
		if err := collectives.WaitAllOn(mpiComm, reqs); err == nil {
			t.Fatal("a 128-byte message into a 64-byte buffer was received")
		}
		before := mpiComm.Handoffs()
		reqs[1].Wait()
		if n := mpiComm.Handoffs() - before; n != 0 {
			t.Fatalf("the second receive was still in flight after the batch's wait (%d hand-offs to wait it)", n)
		}
	case 1:
		ts := []collectives.Transfer{{Buf: make([]byte, 128), Peer: 0, Tag: tag}, {Buf: make([]byte, 64), Peer: 0, Tag: tag}}
		reqs := make([]collectives.Request, 2)
		if err := collectives.Start(mpiComm, ts, reqs); err != nil {
			t.Fatal(err)
		}
		if err := collectives.WaitAllOn(mpiComm, reqs); err != nil {
			t.Fatal(err)
		}
	}
	if err := mpiComm.Barrier(); err != nil {
		t.Fatal(err)
	}
}

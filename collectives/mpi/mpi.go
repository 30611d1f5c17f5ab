// Package mpi is the collectives.Comm transport over an MPI library
// (OpenMPI here): gompi for start-up facts and Finalize, and its own small
// cgo (sc_mpi.c) for what gompi lacks. Only the command links it, so the
// engine and its tests build without MPI headers or libraries.
package mpi

/*
#cgo linux CFLAGS: -I/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi -I/usr/lib/x86_64-linux-gnu/openmpi/include -I/usr/lib/aarch64-linux-gnu/openmpi/include -I/usr/lib/aarch64-linux-gnu/openmpi/include/openmpi -pthread
#cgo linux LDFLAGS: -pthread -L/usr/lib/x86_64-linux-gnu/openmpi/lib -L/usr/lib/aarch64-linux-gnu/openmpi/lib -lmpi
#include <stdlib.h>
#include "sc_mpi.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	gompi "github.com/sbromberger/gompi"

	"sancus/collectives"
)

// Comm is a communicator of the MPI transport. gompi provides start-up
// facts and Finalize; the calls it lacks or gets wrong (byte point-to-point,
// non-blocking calls, Allgatherv, Alltoallv, error codes) are in sc_mpi.c.
//
// Every MPI call runs on one goroutine locked to one OS thread, the thread
// that initialized MPI (MPI_THREAD_FUNNELED): Go moves goroutines between
// threads, and FUNNELED is the level every MPI library supports well. The
// compute goroutines overlap with communication because they never wait on
// that thread.
type Comm struct {
	calls     chan func()
	comm      C.MPI_Comm
	rank      int
	size      int
	localSize int
	sub       bool // made by Split: Close frees it instead of finalizing MPI
	stats     *collectives.Stats
	timeout   time.Duration
}

// mpiErr turns an MPI return code into an error with the library's text.
func mpiErr(rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	buf := (*C.char)(C.malloc(C.MPI_MAX_ERROR_STRING + 1))
	defer C.free(unsafe.Pointer(buf))
	C.sc_error_string(rc, buf, C.MPI_MAX_ERROR_STRING+1)
	return fmt.Errorf("MPI error %d: %s", int(rc), C.GoString(buf))
}

var mpiWorld *Comm

// Start initializes MPI (once per process) and returns the world
// communicator. timeout bounds each wait; past it the job is aborted with a
// message naming the rank and operation.
func Start(timeout time.Duration) (*Comm, error) {
	if mpiWorld != nil {
		return mpiWorld, nil
	}
	if timeout <= 0 {
		timeout = collectives.DefaultTimeout
	}
	skipHwlocPlugins()
	m := &Comm{calls: make(chan func()), stats: &collectives.Stats{}, timeout: timeout}
	errc := make(chan error)
	go m.serve(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	mpiWorld = m
	return m, nil
}

// hwlocSkipped are the hwloc plugins a rank has no use for: OS devices of
// X displays (gl) and OpenCL platforms, and libxml2's XML parser (hwloc's
// own reads the topology XML OpenMPI hands its ranks). MPI_Init would load
// them into every rank, and with them libX11, libOpenCL, libxml2 and ICU:
// 3 MB of each rank's resident memory (19.3 -> 16.4 MB before any data,
// under mpirun, Debian's OpenMPI 4.1 and hwloc 2.9). The PCI plugin stays:
// MPI places network devices by it.
const hwlocSkipped = "hwloc_gl,hwloc_opencl,hwloc_xml_libxml"

// skipHwlocPlugins keeps hwloc from loading hwlocSkipped, unless the user
// chose plugins or components already. hwloc reads the variable when MPI_Init
// builds the topology, after this; cgo's os.Setenv reaches C's environment.
func skipHwlocPlugins() {
	for _, v := range []string{"HWLOC_PLUGINS_BLACKLIST", "HWLOC_COMPONENTS"} {
		if _, set := os.LookupEnv(v); set {
			return
		}
	}
	os.Setenv("HWLOC_PLUGINS_BLACKLIST", hwlocSkipped)
}

func (m *Comm) serve(errc chan<- error) {
	runtime.LockOSThread() // never unlocked: this thread owns MPI
	var provided C.int
	if err := mpiErr(C.sc_init(&provided)); err != nil {
		errc <- fmt.Errorf("MPI_Init_thread: %w", err)
		return
	}
	if provided < C.MPI_THREAD_FUNNELED {
		errc <- fmt.Errorf("MPI library provides thread level %d, sancus needs MPI_THREAD_FUNNELED", int(provided))
		return
	}
	if err := mpiErr(C.sc_dup_world(&m.comm)); err != nil {
		errc <- fmt.Errorf("MPI_Comm_dup: %w", err)
		return
	}
	m.rank, m.size = gompi.WorldRank(), gompi.WorldSize()
	var local C.int
	if err := mpiErr(C.sc_local_size(m.comm, &local)); err != nil {
		errc <- fmt.Errorf("MPI_Comm_split_type: %w", err)
		return
	}
	m.localSize = int(local)
	errc <- nil
	// While transfers are in flight, the thread probes every probeEvery
	// between calls (unless SetProgress stopped it): MPI moves a large
	// message only inside its own calls, so without this a message sent
	// before a long computation would sit at its first fragment until the
	// next wait, and the exchange could not hide behind the compute.
	poll := time.NewTicker(progressEvery)
	poll.Stop()
	ticking := false
	for {
		var f func()
		if !ticking {
			f = <-m.calls
		} else {
			select {
			case f = <-m.calls:
			case <-poll.C:
				C.sc_progress(m.comm)
				continue
			}
		}
		f()
		if on := inflight > 0 && probeEvery > 0; on != ticking {
			if on {
				poll.Reset(probeEvery)
			} else {
				poll.Stop()
			}
			ticking = on
		}
	}
}

// inflight counts the requests started and not yet waited for, and
// probeEvery is how often the MPI thread probes meanwhile (0: never); only
// the MPI thread touches them.
var (
	inflight   int
	probeEvery = progressEvery
)

// SetProgress sets how often the MPI thread probes while transfers are in
// flight: every, or never (0), when MPI moves a message only inside the
// call that waits for it. Each probe wakes the MPI thread on a core the
// compute may need (launch.ProbesMPI says where it does).
func (m *Comm) SetProgress(every time.Duration) error {
	return m.do(opName("progress"), func() C.int {
		probeEvery = every
		return C.MPI_SUCCESS
	})
}

// SetNap sets how the MPI thread waits for transfers and collectives: in
// MPI's blocking calls (0), which spin, or by testing and sleeping nap
// between tests, with the nonblocking collectives. Spinning answers a
// message soonest while each rank has a core; where ranks outnumber the
// cores a spinning rank holds one that the peer it waits for needs, for
// as long as the scheduler lets it (launch.Wait chooses).
func (m *Comm) SetNap(nap time.Duration) error {
	return m.do(opName("wait policy"), func() C.int {
		C.sc_set_nap(C.long(nap.Nanoseconds()))
		return C.MPI_SUCCESS
	})
}

// progressEvery is short next to the time a link drains a socket's buffer
// (a megabyte takes 8 ms at 1 Gbit/s) and long next to a probe's cost.
const progressEvery = 200 * time.Microsecond

// opName names a call in errors; a request names itself (mpiReq.String),
// its text made only when needed.
type opName string

func (o opName) String() string { return string(o) }

// do runs f on the MPI thread and waits for it, aborting the job if it does
// not finish within the timeout (a dead or hung peer).
func (m *Comm) do(op fmt.Stringer, f func() C.int) error {
	handoffs.Add(1)
	w := waiters.Get().(*waiter)
	w.f = f
	m.calls <- w.run
	w.timer.Reset(m.timeout)
	select {
	case rc := <-w.done:
		w.timer.Stop()
		w.f = nil
		waiters.Put(w)
		if err := mpiErr(rc); err != nil {
			return &collectives.Error{Rank: m.rank, Op: op.String(), Err: err}
		}
		return nil
	case <-w.timer.C:
		fmt.Fprintf(os.Stderr, "sancus: rank %d: %s timed out after %v (a peer died or hangs); aborting the job\n", m.rank, op, m.timeout)
		// The MPI thread is stuck in the call, so abort from here: a
		// best-effort MPI_Abort, then exit so the launcher tears down the rest.
		C.sc_abort(m.comm, 3)
		os.Exit(3)
		return nil
	}
}

// A waiter is one call's result channel and watchdog timer, kept for the
// next call: a fresh pair per call was most of the garbage an epoch left
// once the weight gradients kept their partial sums.
type waiter struct {
	done  chan C.int
	timer *time.Timer
	f     func() C.int // the call run sends to the MPI thread
	run   func()
}

var waiters = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	w := &waiter{done: make(chan C.int, 1), timer: t}
	w.run = func() { w.done <- w.f() }
	return w
}}

// Split partitions the communicator (MPI_Comm_split): ranks passing the
// same color form a new communicator, ordered by key. It shares this
// communicator's MPI thread and timeout. Collective over all ranks.
func (m *Comm) Split(color, key int) (*Comm, error) {
	sub := &Comm{calls: m.calls, stats: &collectives.Stats{}, timeout: m.timeout, localSize: m.localSize}
	err := m.do(opName("MPI_Comm_split"), func() C.int {
		if rc := C.sc_split(m.comm, C.int(color), C.int(key), &sub.comm); rc != C.MPI_SUCCESS {
			return rc
		}
		var r, s C.int
		if rc := C.sc_rank(sub.comm, &r); rc != C.MPI_SUCCESS {
			return rc
		}
		rc := C.sc_size(sub.comm, &s)
		sub.rank, sub.size = int(r), int(s)
		return rc
	})
	if err != nil {
		return nil, err
	}
	sub.sub = true
	return sub, nil
}

// LocalSize is the number of ranks on this node.
func (m *Comm) LocalSize() int { return m.localSize }

func (m *Comm) Rank() int                 { return m.rank }
func (m *Comm) Size() int                 { return m.size }
func (m *Comm) Stats() *collectives.Stats { return m.stats }

func bptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func fptr(b []float32) *C.float {
	if len(b) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&b[0]))
}

// An mpiReq is one Isend or Irecv. step, bound once, starts it on the MPI
// thread and later waits for it: a message costs the request and that
// binding, not a closure and a formatted name per call.
type mpiReq struct {
	m         *Comm
	req       C.MPI_Request
	pin       runtime.Pinner
	buf       []byte
	peer, tag int
	count     C.int // bytes received, set by the wait
	step      func() C.int
	isRecv    bool
	started   bool
	done      bool
}

func (r *mpiReq) call() C.int {
	if r.started {
		inflight--
		return C.sc_waitall(1, &r.req, &r.count)
	}
	r.started = true
	var rc C.int
	if r.isRecv {
		rc = C.sc_irecv(bptr(r.buf), C.int(len(r.buf)), C.int(r.peer), C.int(r.tag), r.m.comm, &r.req)
	} else {
		rc = C.sc_isend(bptr(r.buf), C.int(len(r.buf)), C.int(r.peer), C.int(r.tag), r.m.comm, &r.req)
	}
	if rc == C.MPI_SUCCESS {
		inflight++
	}
	return rc
}

func (r *mpiReq) String() string {
	if r.isRecv {
		return fmt.Sprintf("recv from rank %d (tag %d)", r.peer, r.tag)
	}
	return fmt.Sprintf("send to rank %d (tag %d)", r.peer, r.tag)
}

// The buffer stays pinned from the start of the transfer until Wait, since
// MPI writes into (or reads from) it after Isend/Irecv return.
func (m *Comm) start(buf []byte, peer, tag int, recv bool) (collectives.Request, error) {
	r := &mpiReq{m: m, buf: buf, peer: peer, tag: tag, isRecv: recv}
	r.step = r.call
	if len(buf) > 0 {
		r.pin.Pin(&buf[0])
	}
	err := m.do(r, r.step)
	if err != nil {
		r.pin.Unpin()
		return nil, err
	}
	if !recv {
		m.stats.Sent(1)
	}
	return r, nil
}

func (m *Comm) Isend(buf []byte, dst, tag int) (collectives.Request, error) {
	return m.start(buf, dst, tag, false)
}
func (m *Comm) Irecv(buf []byte, src, tag int) (collectives.Request, error) {
	return m.start(buf, src, tag, true)
}

func (r *mpiReq) Wait() error {
	if r.done {
		return nil
	}
	err := r.m.do(r, r.step)
	r.done = true
	r.pin.Unpin()
	if err != nil {
		return err
	}
	if r.isRecv && int(r.count) != len(r.buf) {
		return &collectives.Error{Rank: r.m.rank, Op: r.String(), Err: fmt.Errorf("message of %d bytes for a buffer of %d", int(r.count), len(r.buf))}
	}
	r.buf = nil
	return nil
}

// Test reports whether the request has completed, completing it if so,
// without blocking the MPI thread (collectives.Tester).
func (r *mpiReq) Test() (bool, error) {
	if r.done {
		return true, nil
	}
	var flag C.int
	err := r.m.do(r, func() C.int {
		rc := C.sc_test(&r.req, &flag, &r.count)
		if rc == C.MPI_SUCCESS && flag != 0 {
			inflight--
		}
		return rc
	})
	if err != nil || flag == 0 {
		return false, err
	}
	r.done = true
	r.pin.Unpin()
	if r.isRecv && int(r.count) != len(r.buf) {
		return true, &collectives.Error{Rank: r.m.rank, Op: r.String(), Err: fmt.Errorf("message of %d bytes for a buffer of %d", int(r.count), len(r.buf))}
	}
	r.buf = nil
	return true, nil
}

// StartBatch starts every transfer in one hand-off to the MPI thread
// (collectives.Batcher).
func (m *Comm) StartBatch(ts []collectives.Transfer, out []collectives.Request) error {
	rs := make([]*mpiReq, len(ts))
	for i, t := range ts {
		r := &mpiReq{m: m, buf: t.Buf, peer: t.Peer, tag: t.Tag, isRecv: t.Recv}
		r.step = r.call
		if len(t.Buf) > 0 {
			r.pin.Pin(&t.Buf[0])
		}
		rs[i] = r
	}
	started := 0
	err := m.do(batchOp{"start", rs}, func() C.int {
		for _, r := range rs {
			if rc := r.call(); rc != C.MPI_SUCCESS {
				return rc
			}
			started++
		}
		return C.MPI_SUCCESS
	})
	for i, r := range rs {
		if i < started {
			out[i] = r
			if !r.isRecv {
				m.stats.Sent(1)
			}
		} else {
			out[i] = nil
			r.pin.Unpin()
		}
	}
	return err
}

// WaitBatch waits for every started request of this communicator's MPI
// thread in one hand-off (collectives.BatchWaiter); others are waited for
// one by one. It returns the first error. A request whose wait failed
// counts as waited: a cleanup that waits again must not hand MPI a freed
// request.
func (m *Comm) WaitBatch(reqs []collectives.Request) error {
	rs := make([]*mpiReq, 0, len(reqs))
	var first error
	for _, q := range reqs {
		switch r, ok := q.(*mpiReq); {
		case q == nil:
		case ok && r.m.calls == m.calls && !r.done:
			rs = append(rs, r)
		default:
			if err := q.Wait(); err != nil && first == nil {
				first = err
			}
		}
	}
	if len(rs) == 0 {
		return first
	}
	// Every request is waited for, even past a failed one: the caller's
	// buffers must be free when this returns. One sc_waitall, so that a
	// napping thread tests the batch between naps, not one request a nap.
	waited := 0
	err := m.do(batchOp{"wait", rs}, func() C.int {
		waitReqs, waitCounts = waitReqs[:0], waitCounts[:0]
		for _, r := range rs {
			waitReqs = append(waitReqs, r.req)
			waitCounts = append(waitCounts, 0)
		}
		rc := C.sc_waitall(C.int(len(rs)), &waitReqs[0], &waitCounts[0])
		for i, r := range rs {
			r.req, r.count = waitReqs[i], waitCounts[i]
		}
		inflight -= len(rs)
		waited = len(rs)
		return rc
	})
	for _, r := range rs[:waited] {
		r.done = true
		r.pin.Unpin()
		if err == nil && r.isRecv && int(r.count) != len(r.buf) {
			err = &collectives.Error{Rank: m.rank, Op: r.String(), Err: fmt.Errorf("message of %d bytes for a buffer of %d", int(r.count), len(r.buf))}
		}
		r.buf = nil
	}
	if first == nil {
		first = err
	}
	return first
}

// waitReqs and waitCounts are WaitBatch's requests and byte counts in the
// arrays MPI takes, kept for the next batch; only the MPI thread touches them.
var (
	waitReqs   []C.MPI_Request
	waitCounts []C.int
)

// batchOp names a batch in errors.
type batchOp struct {
	what string
	rs   []*mpiReq
}

func (b batchOp) String() string {
	return fmt.Sprintf("%s of %d transfers (the first: %v)", b.what, len(b.rs), b.rs[0])
}

// Handoffs is how many calls this process has handed to its MPI thread.
func (m *Comm) Handoffs() int64 { return handoffs.Load() }

var handoffs atomic.Int64

func (m *Comm) Barrier() error {
	return m.do(opName("barrier"), func() C.int { return C.sc_barrier(m.comm) })
}

func (m *Comm) Bcast(buf []byte, root int) error {
	return m.do(opName(fmt.Sprintf("MPI_Bcast from root %d", root)), func() C.int {
		return C.sc_bcast(bptr(buf), C.int(len(buf)), C.int(root), m.comm)
	})
}

func (m *Comm) Allreduce(buf []float32) error {
	return m.do(opName("MPI_Allreduce"), func() C.int { return C.sc_allreduce_sum(fptr(buf), C.int(len(buf)), m.comm) })
}

func cints(xs []int) ([]C.int, []C.int) {
	counts := make([]C.int, len(xs))
	displs := make([]C.int, len(xs))
	off := 0
	for i, x := range xs {
		counts[i], displs[i] = C.int(x), C.int(off)
		off += x
	}
	return counts, displs
}

func (m *Comm) Allgatherv(send, recv []byte, counts []int) error {
	if counts[m.rank] != len(send) {
		return &collectives.Error{Rank: m.rank, Op: "allgatherv", Err: fmt.Errorf("sending %d bytes, counts say %d", len(send), counts[m.rank])}
	}
	cs, ds := cints(counts)
	return m.do(opName("MPI_Allgatherv"), func() C.int {
		return C.sc_allgatherv(bptr(send), C.int(len(send)), bptr(recv), &cs[0], &ds[0], m.comm)
	})
}

func (m *Comm) Alltoallv(send []byte, sendCounts []int, recv []byte, recvCounts []int) error {
	sc, sd := cints(sendCounts)
	rc, rd := cints(recvCounts)
	return m.do(opName("MPI_Alltoallv"), func() C.int {
		return C.sc_alltoallv(bptr(send), &sc[0], &sd[0], bptr(recv), &rc[0], &rd[0], m.comm)
	})
}

// Abort prints err (it names the rank) and ends every rank of the job.
func (m *Comm) Abort(err error) {
	fmt.Fprintf(os.Stderr, "sancus: rank %d: %v; aborting the job\n", m.rank, err)
	done := make(chan struct{})
	go func() {
		m.calls <- func() { C.sc_abort(m.comm, 1) }
		close(done)
	}()
	select {
	case <-done:
		time.Sleep(10 * time.Second) // MPI_Abort kills this process meanwhile
	case <-time.After(5 * time.Second):
	}
	os.Exit(1)
}

// Close finalizes MPI (or frees a communicator made by Split). The process
// must not use MPI after closing the world communicator.
func (m *Comm) Close() error {
	if m.sub {
		return m.do(opName("MPI_Comm_free"), func() C.int { return C.sc_free(&m.comm) })
	}
	err := m.do(opName("MPI_Finalize"), func() C.int {
		gompi.Stop()
		return C.MPI_SUCCESS
	})
	return err
}

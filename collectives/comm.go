// Package collectives is the only way sancus ranks talk to each other.
//
// A transport (collectives/mpi, the in-process World here) implements Comm:
// non-blocking point-to-point plus the collectives the library it wraps does
// natively. Comm moves bytes; the typed helpers in typed.go move float32,
// int32, int64 … slices as their bytes, without copies or bit-casts. The algorithms SANCUS needs — ring-pipelined broadcast,
// skip-broadcast, ring allreduce — are written once here, over Comm's
// point-to-point calls, so every transport runs the same code and the
// engine never knows which one it has.
package collectives

import (
	"fmt"
	"time"
)

// Request is an outstanding non-blocking operation.
type Request interface {
	// Wait blocks until the operation completes or the communicator fails.
	// Waiting again on a finished request returns at once.
	Wait() error
}

// A Tester is a Request that can say whether it has completed without
// blocking (MPI_Test): a rank that waits by testing and sleeping leaves
// the core to the ranks sharing it, where MPI_Wait would spin on it.
type Tester interface {
	Test() (done bool, err error)
}

// Comm is a group of ranks exchanging bytes. Counts are in bytes; the typed
// helpers (Isend, Allgatherv … in typed.go) count in elements.
type Comm interface {
	Rank() int
	Size() int

	// Isend and Irecv start a transfer of buf to/from a peer. buf must not be
	// touched until Wait returns. Messages between a pair with the same tag
	// arrive in the order they were sent.
	Isend(buf []byte, dst, tag int) (Request, error)
	Irecv(buf []byte, src, tag int) (Request, error)

	// Native collectives of the underlying library.
	Barrier() error
	Bcast(buf []byte, root int) error
	Allreduce(buf []float32) error // element-wise float32 sum, in place
	// Allgatherv: rank r contributes send (len counts[r]); recv holds all
	// contributions in rank order.
	Allgatherv(send, recv []byte, counts []int) error
	// Alltoallv: sendCounts[d] bytes go to rank d, in rank order; recv
	// receives recvCounts[s] bytes from each rank s, in rank order.
	Alltoallv(send []byte, sendCounts []int, recv []byte, recvCounts []int) error

	// Abort ends the whole job: every rank stops with err's message, which
	// names this rank. It does not return on MPI.
	Abort(err error)

	// Stats is this rank's traffic and time per operation.
	Stats() *Stats
	Close() error
}

// Tags used by the algorithms in this package; transports reserve nothing.
const (
	tagRingBcast = 101 + iota
	tagRingAllreduce
	tagAllgather
	tagAlltoall
	tagBarrier
	tagBcast
	tagLink
	tagLinkBarrier
	TagUser = 1000 // first tag free for callers
)

// Error is a failure tied to a rank and an operation, so a job log says who
// failed doing what.
type Error struct {
	Rank int
	Op   string
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("rank %d: %s: %v", e.Rank, e.Op, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// OpErr ties err to c's rank and the operation (nil stays nil).
func OpErr(c Comm, op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*Error); ok {
		return err
	}
	return &Error{Rank: c.Rank(), Op: op, Err: err}
}

// DefaultTimeout bounds every wait; a peer that died or hangs turns into an
// error (in-process) or an abort of the job (MPI) instead of a hang.
var DefaultTimeout = 120 * time.Second

// WaitAll waits for every request and returns the first error.
func WaitAll(reqs []Request) error {
	var first error
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if err := r.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

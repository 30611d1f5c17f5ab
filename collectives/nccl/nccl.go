//go:build cuda

package nccl

/*
#cgo CFLAGS: -I/usr/local/cuda/include
#cgo LDFLAGS: -lnccl
#include <cuda.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

// NCCL drives the device through the runtime API, which uses the current
// context: make the backend's primary context current first.
static int sc_nccl_init(void *ctx, ncclComm_t *comm, const char *id, int size, int rank) {
  if (cuCtxSetCurrent((CUcontext)ctx) != CUDA_SUCCESS) return -1;
  ncclUniqueId u;
  memcpy(u.internal, id, NCCL_UNIQUE_ID_BYTES);
  return ncclCommInitRank(comm, size, u, rank);
}

static int sc_nccl_id(char *out) {
  ncclUniqueId u;
  ncclResult_t r = ncclGetUniqueId(&u);
  memcpy(out, u.internal, NCCL_UNIQUE_ID_BYTES);
  return r;
}

static int sc_nccl_bcast(void *ctx, ncclComm_t comm, void *stream, unsigned long long buf, size_t count, int root) {
  if (cuCtxSetCurrent((CUcontext)ctx) != CUDA_SUCCESS) return -1;
  return ncclBroadcast((const void *)buf, (void *)buf, count, ncclFloat, root, comm, (cudaStream_t)stream);
}

static int sc_nccl_allreduce(void *ctx, ncclComm_t comm, void *stream, unsigned long long buf, size_t count) {
  if (cuCtxSetCurrent((CUcontext)ctx) != CUDA_SUCCESS) return -1;
  return ncclAllReduce((const void *)buf, (void *)buf, count, ncclFloat, ncclSum, comm, (cudaStream_t)stream);
}

static int sc_nccl_group_start(void) { return ncclGroupStart(); }
static int sc_nccl_group_end(void) { return ncclGroupEnd(); }
static int sc_nccl_destroy(ncclComm_t comm) { return ncclCommDestroy(comm); }
static const char *sc_nccl_error(int r) {
  if (r < 0) return "could not make the CUDA context current";
  return ncclGetErrorString((ncclResult_t)r);
}
static int sc_nccl_id_bytes(void) { return NCCL_UNIQUE_ID_BYTES; }
*/
import "C"

import (
	"fmt"
	"unsafe"

	"sancus/collectives"
	"sancus/kernels/cuda"
	"sancus/kernels/matrix"
)

// Comm is one rank's NCCL communicator on its backend's GPU and stream.
type Comm struct {
	c           C.ncclComm_t
	ctx, stream unsafe.Pointer
	be          *cuda.Backend
	rank, size  int
}

func check(r C.int, what string, rank int) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("nccl rank %d: %s: %s", rank, what, C.GoString(C.sc_nccl_error(r)))
}

// Bootstrap makes the communicator of host's ranks: rank 0 draws the NCCL
// unique id and host broadcasts its bytes to every rank.
func Bootstrap(host collectives.Comm, be *cuda.Backend) (*Comm, error) {
	id := make([]byte, int(C.sc_nccl_id_bytes()))
	if host.Rank() == 0 {
		if err := check(C.sc_nccl_id((*C.char)(unsafe.Pointer(&id[0]))), "unique id", 0); err != nil {
			return nil, err
		}
	}
	if host.Size() > 1 {
		if err := collectives.Native(host, id, 0); err != nil {
			return nil, fmt.Errorf("nccl: sending the unique id: %w", err)
		}
	}
	return New(be, id, host.Rank(), host.Size())
}

// New joins rank of a size-rank communicator identified by id.
func New(be *cuda.Backend, id []byte, rank, size int) (*Comm, error) {
	if len(id) != int(C.sc_nccl_id_bytes()) {
		return nil, fmt.Errorf("nccl: unique id has %d bytes, want %d", len(id), int(C.sc_nccl_id_bytes()))
	}
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("nccl: rank %d outside a communicator of %d", rank, size)
	}
	c := &Comm{be: be, rank: rank, size: size}
	c.ctx, c.stream = be.Handles()
	cid := C.CBytes(id)
	defer C.free(cid)
	if err := check(C.sc_nccl_init(c.ctx, &c.c, (*C.char)(cid), C.int(size), C.int(rank)), "init", rank); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Comm) ptr(d *matrix.Dense) (C.ulonglong, error) {
	p, ok := cuda.DevicePtr(d)
	if !ok {
		return 0, fmt.Errorf("nccl rank %d: a %dx%d block is not in device memory", c.rank, d.Rows, d.Cols)
	}
	return C.ulonglong(p), nil
}

// Bcast sends root's d to every rank, in place.
func (c *Comm) Bcast(d *matrix.Dense, root int) error {
	p, err := c.ptr(d)
	if err != nil {
		return err
	}
	return check(C.sc_nccl_bcast(c.ctx, c.c, c.stream, p, C.size_t(d.Rows*d.Cols), C.int(root)), fmt.Sprintf("broadcast from root %d", root), c.rank)
}

// SkipBcast broadcasts blocks[j] from every active root j, all in one NCCL
// group so the transfers overlap; a stale root's block is left as cached.
func (c *Comm) SkipBcast(blocks []*matrix.Dense, active []bool) error {
	if len(blocks) != c.size || len(active) != c.size {
		return fmt.Errorf("nccl rank %d: skip-broadcast of %d blocks with %d flags on %d ranks", c.rank, len(blocks), len(active), c.size)
	}
	if err := check(C.sc_nccl_group_start(), "group start", c.rank); err != nil {
		return err
	}
	var first error
	for j, a := range active {
		if !a || blocks[j].Rows*blocks[j].Cols == 0 {
			continue
		}
		p, err := c.ptr(blocks[j])
		if err == nil {
			err = check(C.sc_nccl_bcast(c.ctx, c.c, c.stream, p, C.size_t(blocks[j].Rows*blocks[j].Cols), C.int(j)), fmt.Sprintf("broadcast from root %d", j), c.rank)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if err := check(C.sc_nccl_group_end(), "group end", c.rank); err != nil && first == nil {
		first = err
	}
	return first
}

// Allreduce sums d over the ranks, in place.
func (c *Comm) Allreduce(d *matrix.Dense) error {
	p, err := c.ptr(d)
	if err != nil {
		return err
	}
	return check(C.sc_nccl_allreduce(c.ctx, c.c, c.stream, p, C.size_t(d.Rows*d.Cols)), "allreduce", c.rank)
}

// OpenBlockComm is Bootstrap as a collectives.BlockCommOpener, for
// collectives.UseBlockComm(collectives.DeviceCommNCCL, nccl.OpenBlockComm).
func OpenBlockComm(host collectives.Comm, m collectives.Mover) (collectives.BlockComm, error) {
	b, ok := m.(*cuda.Backend)
	if !ok {
		return nil, fmt.Errorf("nccl moves device blocks: train with --device cuda")
	}
	return Bootstrap(host, b)
}

// Name is "nccl".
func (c *Comm) Name() string { return "nccl" }

// Close frees the communicator.
func (c *Comm) Close() error { return check(C.sc_nccl_destroy(c.c), "destroy", c.rank) }

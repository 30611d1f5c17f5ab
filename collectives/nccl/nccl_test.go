//go:build cuda

package nccl

import (
	"testing"
	"time"

	"sancus/collectives"
	"sancus/kernels/cuda"
	"sancus/kernels/matrix"
)

// TestNCCL runs the NCCL collectives on as many in-process ranks as there
// are GPUs (NCCL refuses two ranks of one communicator on one GPU), each
// rank bootstrapped over the in-process transport.
func TestNCCL(t *testing.T) {
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	err = collectives.NewWorld(n, time.Minute).Run(func(host collectives.Comm) error {
		be, err := cuda.Open(host.Rank())
		if err != nil {
			return err
		}
		defer be.Close()
		c, err := Bootstrap(host, be)
		if err != nil {
			return err
		}
		defer c.Close()
		r, p := host.Rank(), host.Size()
		// Each root's block holds root+1 everywhere it is current; stale
		// roots' blocks must keep what this rank cached (-1).
		blocks := make([]*matrix.Dense, p)
		for j := range blocks {
			blocks[j] = be.NewDense(3+j, 5) // uneven sizes
			for i := range blocks[j].Data {
				blocks[j].Data[i] = -1
				if j == r {
					blocks[j].Data[i] = float32(j + 1)
				}
			}
			be.Upload(blocks[j])
		}
		for _, pattern := range [][]bool{allFlags(p, false), allFlags(p, true)} {
			if err := c.SkipBcast(blocks, pattern); err != nil {
				return err
			}
			for j, b := range blocks {
				be.Download(b)
				want := float32(-1)
				if pattern[j] || j == r {
					want = float32(j + 1)
				}
				for _, v := range b.Data {
					if v != want {
						t.Errorf("rank %d, root %d, active %v: got %v want %v", r, j, pattern[j], v, want)
						break
					}
				}
			}
		}
		sum := be.NewDense(1000, 3)
		for i := range sum.Data {
			sum.Data[i] = float32(r + 1)
		}
		be.Upload(sum)
		if err := c.Allreduce(sum); err != nil {
			return err
		}
		be.Download(sum)
		if want := float32(p * (p + 1) / 2); sum.Data[999] != want {
			t.Errorf("rank %d: allreduce gave %v, want %v", r, sum.Data[999], want)
		}
		if err := c.Bcast(sum, 0); err != nil {
			return err
		}
		if _, err := c.ptr(matrix.NewDense(2, 2)); err == nil {
			t.Error("a host matrix was accepted as a device block")
		}
		return be.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NCCL collectives checked on %d rank(s), one per GPU", n)
}

func allFlags(p int, v bool) []bool {
	f := make([]bool, p)
	for i := range f {
		f[i] = v
	}
	return f
}

func TestBadRank(t *testing.T) {
	be, err := cuda.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if _, err := New(be, make([]byte, 128), 2, 2); err == nil {
		t.Fatal("rank 2 of 2 accepted")
	}
}

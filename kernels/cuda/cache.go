//go:build cuda

package cuda

// #include "driver.h"
import "C"

import (
	"slices"
	"unsafe"
	"weak"

	"sancus/kernels/matrix"
)

// The device copies of host data the engine passes by slice or pointer:
// Â blocks, label and row lists, dropout ids. A key is weak, so a copy
// whose host value is gone (a cluster batch's blocks and lists, made per
// step) is freed on a later miss instead of piling up on the device; a
// list is compared with the values uploaded last, since the engine may
// refill one slice (a batch's training rows) with other values.

// listCopy is one list's device copy and the values it holds.
type listCopy[T int32 | int64] struct {
	host []T
	dev  *buf
}

// list returns s's device copy, uploading it when its values changed.
func list[T int32 | int64](b *Backend, m map[weak.Pointer[T]]*listCopy[T], s []T) *buf {
	k := weak.Make(&s[0])
	c := m[k]
	if c == nil {
		for k, old := range m {
			if k.Value() == nil {
				b.free(old.dev)
				delete(m, k)
			}
		}
		c = &listCopy[T]{}
		m[k] = c
	}
	if !slices.Equal(c.host, s) {
		bytes := len(s) * int(unsafe.Sizeof(s[0]))
		if c.dev == nil || c.dev.bytes < bytes {
			b.free(c.dev)
			c.dev = b.alloc(bytes)
		}
		b.upload(c.dev, unsafe.Pointer(&s[0]), bytes)
		c.host = append(c.host[:0], s...)
	}
	return c.dev
}

// csr uploads a sparse matrix once (its values do not change after it is
// made), freeing the copies of matrices that are gone.
func (b *Backend) csr(a *matrix.CSR) *devCSR {
	k := weak.Make(a)
	if d := b.csrs[k]; d != nil {
		return d
	}
	for k, old := range b.csrs {
		if k.Value() == nil {
			b.free(old.rowptr)
			b.free(old.col)
			b.free(old.val)
			delete(b.csrs, k)
		}
	}
	d := &devCSR{rows: a.Rows, cols: a.Cols, nnz: a.NNZ()}
	d.rowptr = b.alloc(len(a.RowPtr) * 8)
	b.upload(d.rowptr, unsafe.Pointer(&a.RowPtr[0]), len(a.RowPtr)*8)
	d.col = b.alloc(len(a.ColIdx) * 4)
	d.val = b.alloc(len(a.Val) * 4)
	if len(a.ColIdx) > 0 {
		b.upload(d.col, unsafe.Pointer(&a.ColIdx[0]), len(a.ColIdx)*4)
		b.upload(d.val, f32(a.Val), len(a.Val)*4)
	}
	b.csrs[k] = d
	return d
}

// free releases one allocation (nil: none).
func (b *Backend) free(x *buf) {
	if x == nil {
		return
	}
	if i := slices.Index(b.all, x); i >= 0 {
		b.all = slices.Delete(b.all, i, i+1)
		b.ok(C.scg_free(b.g, x.p), "free")
	}
}

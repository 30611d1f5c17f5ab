package kernels

/*
#include "cpu.h"
*/
import "C"

import "unsafe"

// Dropout masks are a pure function of (seed, stream, global row, column):
// no state, nothing stored for the backward pass, and the same mask whatever
// the number of ranks or threads. That is what lets a P-rank run reproduce
// the 1-rank run exactly. The hot loops are in dropout.c; Keep is the same
// function in Go.

// Mask identifies one dropout application: a seed, a stream (epoch and layer)
// and the global id of the first local row.
type Mask struct {
	P      float32 // drop probability; 0 disables
	Seed   uint64
	Stream uint64
	Row0   int     // global id of local row 0 (when IDs is nil)
	IDs    []int64 // global id of every local row (a gathered or reordered block)
}

func (m Mask) id(r int) uint64 {
	if m.IDs != nil {
		return uint64(m.IDs[r])
	}
	return uint64(m.Row0 + r)
}

func (m Mask) idPtr() *C.int64_t {
	if len(m.IDs) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&m.IDs[0]))
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (m Mask) threshold() uint32 { return uint32(float64(m.P) * 65536) }
func (m Mask) scale() float32    { return float32(1 / (1 - float64(m.P))) }

// Threshold and KeepScale are the mask's integer cut (a 16-bit draw below it
// drops the element) and the scale of kept elements, for device kernels
// that must draw exactly the same masks.
func (m Mask) Threshold() uint32  { return m.threshold() }
func (m Mask) KeepScale() float32 { return m.scale() }

// Keep reports whether element (local row r, column c) survives.
func (m Mask) Keep(r, c int) bool {
	s := mix64(m.Seed ^ mix64(m.Stream+0x632be59bd9b4e019*(m.id(r)+1)))
	if s == 0 {
		s = 1
	}
	var w uint64
	for q := 0; q <= c/4; q++ {
		s ^= s >> 12
		s ^= s << 25
		s ^= s >> 27
		w = s * 0x2545f4914f6cdd1d
	}
	return uint32(w>>(16*uint(c&3)))&0xffff >= m.threshold()
}

// ApplyDense sets dst = src ⊙ mask / (1−p). dst may alias src.
func (m Mask) ApplyDense(dst, src *Dense) {
	if m.P <= 0 {
		if dst != src {
			copy(dst.Data, src.Data)
		}
		return
	}
	sp, dp := f32p(src.Data), f32p(dst.Data)
	forRanges(evenCuts(src.Rows, threads, 1024), func(lo, hi int) {
		C.sc_dropout_dense(sp, dp, C.int64_t(src.Cols), C.int64_t(lo), C.int64_t(hi),
			C.uint64_t(m.Seed), C.uint64_t(m.Stream), C.int64_t(m.Row0), m.idPtr(), C.uint32_t(m.threshold()), C.float(m.scale()))
	})
}

// ApplyCSR writes into vals the values of a with the mask applied (same
// sparsity structure; dropped entries become 0).
func (m Mask) ApplyCSR(vals []float32, a *CSR) {
	if m.P <= 0 {
		copy(vals, a.Val)
		return
	}
	if a.NNZ() == 0 {
		return
	}
	rp := (*C.int64_t)(unsafe.Pointer(&a.RowPtr[0]))
	cp := (*C.int32_t)(unsafe.Pointer(&a.ColIdx[0]))
	forRanges(nnzCuts(a.RowPtr, threads), func(lo, hi int) {
		C.sc_dropout_csr(rp, cp, f32p(a.Val), f32p(vals), C.int64_t(lo), C.int64_t(hi),
			C.uint64_t(m.Seed), C.uint64_t(m.Stream), C.int64_t(m.Row0), m.idPtr(), C.uint32_t(m.threshold()), C.float(m.scale()))
	})
}

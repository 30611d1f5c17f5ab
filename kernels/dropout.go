package kernels

/*
#include "cpu.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"sancus/kernels/matrix"
)

// The masks are defined in matrix (Mask.Keep); dropout_rng.h draws the same
// values in the C kernels.

// cMask is m as the kernels read it (nil when m drops nothing). Its node
// ids stay pinned until done is called, since C holds a pointer to them.
func cMask(m matrix.Mask) (cm *C.sc_mask, done func()) {
	if m.P <= 0 {
		return nil, func() {}
	}
	cm = &C.sc_mask{seed: C.uint64_t(m.Seed), stream: C.uint64_t(m.Stream), row0: C.int64_t(m.Row0),
		thr: C.uint32_t(m.Threshold()), scale: C.float(m.KeepScale())}
	var pin runtime.Pinner
	if len(m.IDs) > 0 {
		pin.Pin(&m.IDs[0])
		cm.ids = (*C.int64_t)(unsafe.Pointer(&m.IDs[0]))
	}
	return cm, pin.Unpin
}

// keptBits is a dense operand's dropout draws as a forward product drew
// them, one bit per value (sc_mask.bits), so that its backward reads the
// same mask back instead of hashing every value again. Rows are stamped
// with the mask's generation as they are recorded; a backward replays only
// where every row it reads carries the current one. Only operands whose
// width is a multiple of 32 record (the kernels' whole draw groups).
type keptBits struct {
	bits   []byte
	stride int   // bytes a row
	drawn  []int // the generation each row was recorded at (0: never)
	all    int   // the generation every row was recorded at at once (0: never)
}

// bitsUse is what a product does with a record: a forward product writes
// its draws there, a weight gradient reads them back.
type bitsUse int

const (
	recordBits bitsUse = iota
	replayBits
)

// mark stamps the rows a forward product recorded (nil: all) with gen.
// Generations only rise, so a row is current where either its stamp or
// the record's all says gen.
func (k *keptBits) mark(rows []int32, gen int) {
	if rows == nil {
		k.all = gen
		return
	}
	for _, r := range rows {
		k.drawn[r] = gen
	}
}

// current reports whether every row listed (nil: all) was recorded at gen.
func (k *keptBits) current(rows []int32, gen int) bool {
	if k.all == gen {
		return true
	}
	if rows == nil {
		for _, g := range k.drawn {
			if g != gen {
				return false
			}
		}
		return true
	}
	for _, r := range rows {
		if k.drawn[r] != gen {
			return false
		}
	}
	return true
}

// cMask is m as the kernels read it, with the record's bits, to use as
// use says, where kept is not nil.
func (kept *keptBits) cMask(m matrix.Mask, use bitsUse) (*C.sc_mask, func()) {
	cm, done := cMask(m)
	if cm == nil || kept == nil {
		return cm, done
	}
	var pin runtime.Pinner
	pin.Pin(&kept.bits[0])
	cm.bits = (*C.uint8_t)(unsafe.Pointer(&kept.bits[0]))
	cm.bits_stride = C.int64_t(kept.stride)
	cm.replay = cBool(use == replayBits)
	return cm, func() { pin.Unpin(); done() }
}

// Dropout sets dst = src ⊙ mask / (1−p). dst may alias src.
func Dropout(m matrix.Mask, dst, src *matrix.Dense) {
	if m.P <= 0 {
		if dst != src {
			copy(dst.Data, src.Data)
		}
		return
	}
	if len(src.Data) == 0 {
		return
	}
	sp, dp := f32p(src.Data), f32p(dst.Data)
	masked(m, src.Rows, func(cm *C.sc_mask, lo, hi int) {
		C.sc_dropout_dense(sp, dp, C.int64_t(src.Cols), C.int64_t(lo), C.int64_t(hi), cm)
	})
}

// masked runs f over ranges of [0, n) on the kernel threads with m as the
// kernels read it.
func masked(m matrix.Mask, n int, f func(cm *C.sc_mask, lo, hi int)) {
	cm, done := cMask(m)
	defer done()
	inPieces(n, 1024, func(lo, hi int) { f(cm, lo, hi) })
}

// DropoutRows sets dst = src ⊙ mask / (1−p) at the listed rows alone (each
// drawn as Dropout draws it); dst's other rows are left as they are.
func DropoutRows(m matrix.Mask, dst, src *matrix.Dense, rows []int32) error {
	const what = "dropout at rows"
	var shapes error
	if dst.Rows != src.Rows || dst.Cols != src.Cols {
		shapes = fmt.Errorf("%s: %d×%d into %d×%d", what, src.Rows, src.Cols, dst.Rows, dst.Cols)
	}
	if err := checkRows(shapes, what, rows, src.Rows); err != nil {
		return err
	}
	if len(rows) == 0 || src.Cols == 0 {
		return nil
	}
	if m.P <= 0 {
		for _, r := range rows {
			copy(dst.Row(int(r)), src.Row(int(r)))
		}
		return nil
	}
	sp, dp := f32p(src.Data), f32p(dst.Data)
	masked(m, len(rows), func(cm *C.sc_mask, lo, hi int) {
		C.sc_dropout_rows(sp, dp, C.int64_t(src.Cols), (*C.int32_t)(&rows[lo]), C.int64_t(hi-lo), cm)
	})
	return nil
}

// DropoutGather packs the listed rows of src (rows of cols floats) into
// packed, a pack buffer as GatherRows fills, with the mask applied, each
// drawn as Dropout draws it: packed's k-th row is row rows[k] of M(src). A
// sender that masks the rows it sends draws each once, where each of their
// readers would draw it again.
func DropoutGather(m matrix.Mask, packed []byte, src []float32, cols int, rows []int32) error {
	if err := checkPack("dropout gather", "floats", len(packed)/4, len(src), rows, cols); err != nil || len(rows) == 0 {
		return err
	}
	if m.P <= 0 { // nothing to draw: GatherRows' gather
		gatherRows(packed, bytesOf(src), rows, 4*cols)
		return nil
	}
	dst, sp := (*C.float)(unsafe.Pointer(&packed[0])), f32p(src)
	masked(m, len(rows), func(cm *C.sc_mask, lo, hi int) {
		at := (*C.float)(unsafe.Add(unsafe.Pointer(dst), 4*lo*cols))
		C.sc_dropout_gather(sp, at, C.int64_t(cols), (*C.int32_t)(&rows[lo]), C.int64_t(hi-lo), cm)
	})
	return nil
}

// DropoutReLUBackward sets g = M(g) where h > 0 and 0 elsewhere, in one
// pass: Dropout(m, g, g) and then ReLUBackward(g, h), bit for bit. With
// sums (len g.Cols) it also sets sums to ColumnSums of the result, bit for
// bit (the same chunks added in the same order): the bias gradient of the
// layer below, read while the rows are in cache.
func DropoutReLUBackward(m matrix.Mask, g, h *matrix.Dense, sums []float32) {
	if m.P <= 0 {
		ReLUBackward(g, h)
		if sums != nil {
			ColumnSums(sums, g)
		}
		return
	}
	if len(g.Data) == 0 || g.Cols == 0 {
		clear(sums)
		return
	}
	gp, hp, cols := f32p(g.Data), f32p(h.Data), C.int64_t(g.Cols)
	if sums == nil {
		masked(m, g.Rows, func(cm *C.sc_mask, lo, hi int) {
			C.sc_dropout_relu_backward(gp, hp, cols, C.int64_t(lo), C.int64_t(hi), cm, nil)
		})
		return
	}
	cm, done := cMask(m)
	defer done()
	sumChunks(sums, g.Rows, func(r0, r1 int, part []float32) {
		C.sc_dropout_relu_backward(gp, hp, cols, C.int64_t(r0), C.int64_t(r1), cm, f32p(part))
	})
}

// ReLUDroppedBackward is DropoutReLUBackward given d = M(h), the forward's
// dropped ReLU output, instead of h and the mask (scale being the mask's
// KeepScale): g = g·scale where d > 0, else 0, and the same sums, bit for
// bit, with no draw made again (d > 0 exactly where a draw kept h > 0).
func ReLUDroppedBackward(g, d *matrix.Dense, scale float32, sums []float32) error {
	if g.Rows != d.Rows || g.Cols != d.Cols {
		return fmt.Errorf("dropout and ReLU backward: gradient %d×%d, dropped output %d×%d", g.Rows, g.Cols, d.Rows, d.Cols)
	}
	if sums != nil && len(sums) != g.Cols {
		return fmt.Errorf("dropout and ReLU backward: %d sums for %d columns", len(sums), g.Cols)
	}
	if len(g.Data) == 0 || g.Cols == 0 {
		clear(sums)
		return nil
	}
	gp, dp, cols, s := f32p(g.Data), f32p(d.Data), C.int64_t(g.Cols), C.float(scale)
	if sums == nil {
		inPieces(g.Rows, 1024, func(lo, hi int) {
			C.sc_relu_dropped_backward(gp, dp, cols, C.int64_t(lo), C.int64_t(hi), s, nil)
		})
		return nil
	}
	sumChunks(sums, g.Rows, func(r0, r1 int, part []float32) {
		C.sc_relu_dropped_backward(gp, dp, cols, C.int64_t(r0), C.int64_t(r1), s, f32p(part))
	})
	return nil
}

// DropoutCSR writes into vals the values of a with the mask applied (same
// sparsity structure; dropped entries become 0). vals must not be a.Val:
// the kernel writes a row's last vector past its end before the next row
// reads its values.
func DropoutCSR(m matrix.Mask, vals []float32, a *matrix.CSR) {
	if m.P <= 0 {
		copy(vals, a.Val)
		return
	}
	if a.NNZ() == 0 {
		return
	}
	cm, done := cMask(m)
	defer done()
	rp := (*C.int64_t)(unsafe.Pointer(&a.RowPtr[0]))
	cp := (*C.int32_t)(unsafe.Pointer(&a.ColIdx[0]))
	byNonzeros(a.RowPtr, func(lo, hi int) {
		C.sc_dropout_csr(rp, cp, f32p(a.Val), f32p(vals), C.int64_t(lo), C.int64_t(hi), cm)
	})
}

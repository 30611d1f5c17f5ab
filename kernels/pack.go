package kernels

/*
#include "cpu.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// streamGatherBytes is the pack size from which GatherRows streams its
// stores past the caches: beyond the L2, a pack is sent before this core
// could read it again. (A variable: the tests lower it.)
var streamGatherBytes = 8 << 20

// GatherRows packs the listed rows of block, each w bytes, into packed in
// list order (packed's k-th row = block's row rows[k]); ScatterRows puts
// them back. They are the sparse exchange's packing and unpacking: the
// rows lie scattered through a large block, and the C loops prefetch the
// rows ahead, which a Go copy per row cannot; a large pack is streamed.
func GatherRows(packed, block []byte, rows []int32, w int) error {
	return moveRows("gather rows", true, packed, block, rows, w)
}

// ScatterRows writes packed's k-th row (w bytes) to block's row rows[k].
func ScatterRows(block, packed []byte, rows []int32, w int) error {
	return moveRows("scatter rows", false, packed, block, rows, w)
}

// AddRows adds src's k-th row (w floats) to dst's row rows[k]; rows are
// distinct. It is how a rank takes in the sums a peer formed for its rows.
func AddRows(dst, src []float32, rows []int32, w int) error {
	if err := checkPack("add rows", "floats", len(src), len(dst), rows, w); err != nil || len(rows) == 0 {
		return err
	}
	C.sc_add_rows((*C.float)(&dst[0]), (*C.float)(&src[0]), (*C.int32_t)(&rows[0]), C.int64_t(len(rows)), C.int64_t(w))
	return nil
}

func moveRows(what string, gather bool, packed, block []byte, rows []int32, w int) error {
	if err := checkPack(what, "bytes", len(packed), len(block), rows, w); err != nil || len(rows) == 0 {
		return err
	}
	if gather {
		gatherRows(packed, block, rows, w)
		return nil
	}
	C.sc_scatter_rows((*C.char)(unsafe.Pointer(&block[0])), (*C.char)(unsafe.Pointer(&packed[0])),
		(*C.int32_t)(&rows[0]), C.int64_t(len(rows)), C.int64_t(w))
	return nil
}

// bytesOf views non-empty floats as bytes (the pack buffers' type).
func bytesOf(f []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f)) }

// gatherRows is GatherRows on checked, non-empty arguments: a large pack
// streamed past the caches, a small one through them.
func gatherRows(packed, block []byte, rows []int32, w int) {
	p, b := (*C.char)(unsafe.Pointer(&packed[0])), (*C.char)(unsafe.Pointer(&block[0]))
	r, n, cw := (*C.int32_t)(&rows[0]), C.int64_t(len(rows)), C.int64_t(w)
	if len(rows)*w >= streamGatherBytes && w%16 == 0 && uintptr(unsafe.Pointer(p))%16 == 0 {
		C.sc_gather_rows_stream(p, b, r, n, cw)
	} else {
		C.sc_gather_rows(p, b, r, n, cw)
	}
}

// checkPack checks a pack of the listed rows, each w units (unit names
// them), of a block blockLen long into a buffer packedLen long.
func checkPack(what, unit string, packedLen, blockLen int, rows []int32, w int) error {
	if w <= 0 {
		return fmt.Errorf("%s: rows of %d %s", what, w, unit)
	}
	if packedLen < len(rows)*w {
		return fmt.Errorf("%s: %d rows of %d %s need %d %s packed, have %d", what, len(rows), w, unit, len(rows)*w, unit, packedLen)
	}
	return checkRows(nil, what, rows, blockLen/w)
}

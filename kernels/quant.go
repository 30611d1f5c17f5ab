package kernels

/*
#include "cpu.h"
*/
import "C"

import "unsafe"

// QuantizeRows and DequantizeRows are collectives/wire's integer row codec
// (2, 4 or 8 bits) in C, split over the kernel threads: the same bytes and
// values as wire.Encode and wire.Decode, which stay the reference. seeds[r]
// keys row r's stochastic rounding.
func QuantizeRows(dst []byte, x []float32, width, bits int, seeds []uint64) {
	rows := len(seeds)
	if rows == 0 {
		return
	}
	xp, dp, sp := f32p(x), (*C.uint8_t)(unsafe.Pointer(&dst[0])), (*C.uint64_t)(unsafe.Pointer(&seeds[0]))
	forRanges(evenCuts(rows, threads, 2048), func(lo, hi int) {
		C.sc_quant_rows(xp, C.int64_t(lo), C.int64_t(hi), C.int64_t(width), C.int(bits), sp, dp)
	})
}

func DequantizeRows(dst []float32, src []byte, width, bits int, add bool) {
	rows := len(dst) / max(width, 1)
	if rows == 0 {
		return
	}
	a := C.int(0)
	if add {
		a = 1
	}
	sp, dp := (*C.uint8_t)(unsafe.Pointer(&src[0])), f32p(dst)
	forRanges(evenCuts(rows, threads, 2048), func(lo, hi int) {
		C.sc_dequant_rows(sp, C.int64_t(lo), C.int64_t(hi), C.int64_t(width), C.int(bits), a, dp)
	})
}

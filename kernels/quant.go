package kernels

/*
#include "cpu.h"
*/
import "C"

import "unsafe"

// quantBlock is the row block whose error sums are added in order, so the
// reported error does not depend on the thread count.
const quantBlock = 2048

// EncodeBlock is quantBlock for callers: rows encoded in calls of this
// many (the last fewer), their sums added in order, report the sums one
// call over them all does.
const EncodeBlock = quantBlock

// QuantizeRows is collectives/wire's integer row codec (2, 4 or 8 bits) in
// C, split over the kernel threads: the same bytes as wire.Encode, which
// stays the reference, with row r's rounding keyed by
// wire.SeedOf(key, rowHash[r]). It also writes the decoded rows into dec
// (adding them to what dec holds when add is set: a delta), so an owner
// gets the copy its receivers will hold in the same pass, and returns
// Σ(decoded − x)² and Σ ref² for the error report (ref: the values the
// decoded rows stand for; x itself unless x is a delta) over the rows
// whose index is a multiple of errEvery (1: all of them; a sample costs
// less). With rows set it encodes those rows alone, leaving the others of
// dst and dec as they are, and samples every errEvery-th of them. With dec
// nil (and add unset) it writes no decoded rows: an owner that keeps its
// rows encoded decodes them where it reads them, as its receivers do.
func QuantizeRows(dst []byte, dec, x, ref []float32, width, bits int, key uint64, rowHash []uint64, rows []int32, add bool, errEvery int) (errSq, refSq float64) {
	n := len(rowHash)
	var rp *C.int32_t
	if rows != nil {
		n = len(rows)
		if n > 0 {
			rp = (*C.int32_t)(unsafe.Pointer(&rows[0]))
		}
	}
	if n == 0 || width == 0 {
		return 0, 0
	}
	a := cBool(add)
	xp, fp, dp, ep := f32p(x), f32p(ref), (*C.uint8_t)(unsafe.Pointer(&dst[0])), f32p(dec)
	hp := (*C.uint64_t)(unsafe.Pointer(&rowHash[0]))
	nb := (n + quantBlock - 1) / quantBlock
	sums := make([]float64, 2*nb)
	inPieces(nb, 1, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			r0, r1 := b*quantBlock, min((b+1)*quantBlock, n)
			C.sc_quant_rows(xp, fp, C.int64_t(r0), C.int64_t(r1), rp, C.int64_t(width), C.int(bits),
				C.uint64_t(key), hp, dp, ep, a, C.int(max(errEvery, 1)), (*C.double)(unsafe.Pointer(&sums[2*b])))
		}
	})
	for b := 0; b < nb; b++ {
		errSq += sums[2*b]
		refSq += sums[2*b+1]
	}
	return errSq, refSq
}

// DequantizeRows decodes rows packed by QuantizeRows into dst (adding them
// to dst with add): the same values as wire.Decode.
func DequantizeRows(dst []float32, src []byte, width, bits int, add bool) {
	rows := len(dst) / max(width, 1)
	if rows == 0 {
		return
	}
	a := cBool(add)
	sp, dp := (*C.uint8_t)(unsafe.Pointer(&src[0])), f32p(dst)
	inPieces(rows, 2048, func(lo, hi int) {
		C.sc_dequant_rows(sp, C.int64_t(lo), C.int64_t(hi), C.int64_t(width), C.int(bits), a, dp)
	})
}

// IntCodec is the C integer codec of a width (8, 4 or 2 bits): it has
// collectives/wire's Codec methods, so the training setup can name it as
// the codec of that width, as gonum's blas64.Use names an implementation.
// This package imports nothing of collectives.
type IntCodec int

func (b IntCodec) Bits() int { return int(b) }

// RowBytes is a row's offset and step (two bf16 values) and its values
// packed b bits each, as wire.RowBytes counts.
func (b IntCodec) RowBytes(width int) int { return 4 + (width*int(b)+7)/8 }
func (b IntCodec) Encode(dst []byte, dec, x, ref []float32, width int, key uint64, rowHash []uint64, add bool, errEvery int) (float64, float64) {
	return QuantizeRows(dst, dec, x, ref, width, int(b), key, rowHash, nil, add, errEvery)
}
func (b IntCodec) EncodeRows(dst []byte, dec, x, ref []float32, width int, key uint64, rowHash []uint64, rows []int32, add bool, errEvery int) (float64, float64) {
	return QuantizeRows(dst, dec, x, ref, width, int(b), key, rowHash, rows, add, errEvery)
}
func (b IntCodec) Decode(dst []float32, src []byte, width int, add bool) {
	DequantizeRows(dst, src, width, int(b), add)
}

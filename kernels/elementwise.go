package kernels

/*
#include "cpu.h"
*/
import "C"

import (
	"fmt"
	"math"

	"sancus/kernels/matrix"
)

// AddBiasReLU adds bias to every row of z and, if relu is set, clamps at 0,
// in one pass (z becomes the layer output).
func AddBiasReLU(z *matrix.Dense, bias []float32, relu bool) { addBiasReLU(z, bias, relu, nil) }

// ZeroOtherRows zeroes the rows of m that rows (ascending) does not list.
func ZeroOtherRows(m *matrix.Dense, rows []int32) error {
	if err := checkRows(nil, "zero outside rows", rows, m.Rows); err != nil {
		return err
	}
	next := 0 // the first row not yet zeroed or skipped
	for k, r := range rows {
		if int(r) < next {
			return fmt.Errorf("zero outside rows: row list entry %d is %d, not above %d", k, r, next-1)
		}
		Zero(m.Data[next*m.Cols : int(r)*m.Cols])
		next = int(r) + 1
	}
	Zero(m.Data[next*m.Cols:])
	return nil
}

// AddBiasReLURows is AddBiasReLU at the listed rows only (an empty or nil
// list: none).
func AddBiasReLURows(z *matrix.Dense, bias []float32, relu bool, rows []int32) error {
	if err := checkRows(nil, "bias at rows", rows, z.Rows); err != nil {
		return err
	}
	if len(rows) > 0 { // (to addBiasReLU, nil is every row)
		addBiasReLU(z, bias, relu, rows)
	}
	return nil
}

// rowsIn is how many rows a kernel at a row list visits: the list's
// length, or all of them without a list.
func rowsIn(rows []int32, all int) int {
	if rows != nil {
		return len(rows)
	}
	return all
}

// addBiasReLU works on the listed rows (nil: every row).
func addBiasReLU(z *matrix.Dense, bias []float32, relu bool, rows []int32) {
	n := rowsIn(rows, z.Rows)
	if n == 0 || z.Cols == 0 {
		return
	}
	r := cBool(relu)
	zp, bp, lp := f32p(z.Data), f32p(bias), i32p(rows)
	inPieces(n, 2048, func(lo, hi int) {
		C.sc_bias_relu(zp, bp, C.int64_t(z.Cols), C.int64_t(lo), C.int64_t(hi), r, lp)
	})
}

// ReLUBackward zeroes g where the activation h was clamped (h ≤ 0).
func ReLUBackward(g, h *matrix.Dense) {
	byValues(g, h, func(gp, hp *C.float, lo, hi C.int64_t) { C.sc_relu_backward(gp, hp, lo, hi) })
}

// byValues runs an elementwise kernel over a's values (and b's alongside;
// b nil: none) in chunks of 32K or more, split over the kernel threads.
func byValues(a, b *matrix.Dense, kernel func(ap, bp *C.float, lo, hi C.int64_t)) {
	if len(a.Data) == 0 {
		return
	}
	ap, bp := f32p(a.Data), (*C.float)(nil)
	if b != nil {
		bp = f32p(b.Data)
	}
	inPieces(len(a.Data), 1<<15, func(lo, hi int) {
		kernel(ap, bp, C.int64_t(lo), C.int64_t(hi))
	})
}

// Add sets a += b, elementwise.
func Add(a, b *matrix.Dense) {
	byValues(a.Prefix(a.Rows), b, func(ap, bp *C.float, lo, hi C.int64_t) { C.sc_add(ap, bp, lo, hi) })
}

// ScaleRows sets row r of dst to row r of src times s[r], for the rows s
// lists (len(s) ≤ dst.Rows).
func ScaleRows(dst, src *matrix.Dense, s []float32) {
	if len(s) == 0 || dst.Cols == 0 {
		return
	}
	dp, sp, fp, n := f32p(dst.Data), f32p(src.Data), f32p(s), C.int64_t(dst.Cols)
	ParallelRows(len(s), func(lo, hi int) { C.sc_scale_rows(dp, sp, fp, n, C.int64_t(lo), C.int64_t(hi)) })
}

// ELU sets z's negative values x to e^x − 1 in place (GAT's activation,
// after AddBiasReLU without ReLU), through the softmax's exponential.
func ELU(z *matrix.Dense) {
	byValues(z, nil, func(zp, _ *C.float, lo, hi C.int64_t) { C.sc_elu(zp, lo, hi) })
}

// ELUBackward multiplies g by ELU's derivative, read off its output h:
// 1 where h > 0, h + 1 elsewhere.
func ELUBackward(g, h *matrix.Dense) {
	byValues(g, h, func(gp, hp *C.float, lo, hi C.int64_t) { C.sc_elu_backward(gp, hp, lo, hi) })
}

// ColumnSums adds every row of g into out (len g.Cols): a bias gradient.
func ColumnSums(out []float32, g *matrix.Dense) { columnSums(out, g, nil) }

// ColumnSumsRows adds the listed rows of g into out, in list order by fixed
// chunks (the same for any thread count); an empty or nil list sums none.
func ColumnSumsRows(out []float32, g *matrix.Dense, rows []int32) error {
	if err := checkRows(nil, "column sums at rows", rows, g.Rows); err != nil {
		return err
	}
	if len(rows) == 0 { // (to columnSums, nil is every row)
		clear(out)
		return nil
	}
	columnSums(out, g, rows)
	return nil
}

func columnSums(out []float32, g *matrix.Dense, rows []int32) {
	clear(out)
	n := rowsIn(rows, g.Rows)
	if n == 0 || g.Cols == 0 {
		return
	}
	lp := i32p(rows)
	sumChunks(out, n, func(r0, r1 int, part []float32) {
		C.sc_column_sums(f32p(g.Data), C.int64_t(g.Cols), C.int64_t(r0), C.int64_t(r1), lp, f32p(part))
	})
}

// Copy copies src into dst over the kernel threads (one thread's memmove
// reaches half the bandwidth two do).
func Copy(dst, src []float32) {
	n := min(len(dst), len(src))
	inPieces(n, 1<<16, func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// Zero sets x to zeros over the kernel threads.
func Zero(x []float32) {
	inPieces(len(x), 1<<16, func(lo, hi int) { clear(x[lo:hi]) })
}

// FrobNorm returns ‖x‖_F in float64.
func FrobNorm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// FrobDiff returns ‖a − b‖_F in float64.
func FrobDiff(a, b []float32) float64 {
	var s float64
	for i, v := range a {
		d := float64(v) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

// Scale multiplies x by s in place.
func Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

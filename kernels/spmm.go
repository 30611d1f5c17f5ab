package kernels

/*
#cgo CFLAGS: -O3 -std=gnu11
#include "cpu.h"
*/
import "C"

import (
	"fmt"
	"slices"
	"unsafe"

	"sancus/kernels/matrix"
)

func f32p(s []float32) *C.float {
	if len(s) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&s[0]))
}

// cBool is b as a C int flag.
func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func i32p(s []int32) *C.int32_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&s[0]))
}

// SpMM computes C = A·B, or C += A·B when accumulate is set.
// A is m×k matrix.CSR, B is k×n dense, C is m×n dense.
func SpMM(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, accumulate bool) error {
	if err := CheckMul("spmm", c, a.Rows, a.Cols, b); err != nil {
		return err
	}
	spmm(c, a, b, accumulate, nil)
	return nil
}

// SpMMT computes C = Aᵀ·B (A m×k sparse, B m×n, C k×n) without forming
// Aᵀ: each row's nonzeros add its row of B into C's rows, summed by fixed
// row chunks as GEMMTN sums them (the same for any thread count). It reads
// A and B once, in order, where Aᵀ·B through the transpose gathers B's
// rows at random and needs Aᵀ's values refreshed after each dropout.
func SpMMT(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense) error {
	if err := CheckMulTN("spmm Aᵀ·B", c, a.Rows, a.Cols, b); err != nil {
		return err
	}
	if a.NNZ() == 0 || len(c.Data) == 0 {
		c.Zero()
		return nil
	}
	rowp := (*C.int64_t)(unsafe.Pointer(&a.RowPtr[0]))
	colp, valp := (*C.int32_t)(unsafe.Pointer(&a.ColIdx[0])), f32p(a.Val)
	k, n := C.int64_t(a.Cols), C.int64_t(b.Cols)
	sumChunks(c.Data, a.Rows, func(r0, r1 int, part []float32) {
		C.sc_spmm_t(rowp, colp, valp, f32p(b.Data), f32p(part), k, n, C.int64_t(r0), C.int64_t(r1))
	})
	return nil
}

// SpMMRows is SpMM at the listed rows of C (and A) only: C's other rows are
// left as they are, and an empty or nil list writes none. For a block whose
// other rows are empty it skips the pass that would write them zero; an
// ascending list lets the gathers of the next listed rows be prefetched.
func SpMMRows(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, rows []int32, accumulate bool) error {
	const what = "spmm at rows"
	if err := checkRows(CheckMul(what, c, a.Rows, a.Cols, b), what, rows, a.Rows); err != nil {
		return err
	}
	if len(rows) > 0 { // (to spmm, nil is every row)
		spmm(c, a, b, accumulate, rows)
	}
	return nil
}

// OccupiedRows are a sparse matrix's nonempty rows with their nonzeros'
// pointers alone. A block of a rank's row at many ranks has entries in a
// few of its rows: a product at those reads their pointers in order, where
// through the block's own it would miss on a line of them for each row.
type OccupiedRows struct {
	Rows []int32 // ascending
	Ptr  []int64 // row Rows[i]'s nonzeros are Ptr[i]..Ptr[i+1]
}

// Occupied lists a's nonempty rows.
func Occupied(a *matrix.CSR) OccupiedRows {
	var o OccupiedRows
	for r := range a.Rows {
		if a.RowPtr[r+1] > a.RowPtr[r] {
			o.Rows = append(o.Rows, int32(r))
			o.Ptr = append(o.Ptr, a.RowPtr[r])
		}
	}
	if o.Rows != nil {
		o.Ptr = append(o.Ptr, a.RowPtr[o.Rows[len(o.Rows)-1]+1])
	}
	return o
}

// SpMMOccupied is SpMMRows at o.Rows, o being Occupied(a) (or listing
// some of a's rows with their own spans of its nonzeros).
func SpMMOccupied(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, o OccupiedRows, accumulate bool) error {
	const what = "spmm at occupied rows"
	if err := checkRows(CheckMul(what, c, a.Rows, a.Cols, b), what, o.Rows, a.Rows); err != nil {
		return err
	}
	if len(o.Rows) == 0 {
		return nil
	}
	if len(o.Ptr) != len(o.Rows)+1 || o.Ptr[0] < 0 || o.Ptr[len(o.Rows)] > a.NNZ() {
		return fmt.Errorf("%s: %d row pointers for %d rows, or past the %d nonzeros", what, len(o.Ptr), len(o.Rows), a.NNZ())
	}
	for i := range o.Rows {
		if o.Ptr[i+1] < o.Ptr[i] {
			return fmt.Errorf("%s: row pointer %d falls", what, i+1)
		}
	}
	spmmAt(c, a, b, accumulate, o.Rows, o.Ptr)
	return nil
}

// spmm runs the kernel at the listed rows (nil: every row), split by
// nonzeros (listed rows: by count).
func spmm(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, accumulate bool, rows []int32) {
	spmmAt(c, a, b, accumulate, rows, nil)
}

// spmmAt is spmm with, where ptr is set, the listed rows' nonzeros found
// through ptr (OccupiedRows) rather than a.RowPtr.
func spmmAt(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, accumulate bool, rows []int32, ptr []int64) {
	if rowsIn(rows, a.Rows) == 0 || b.Cols == 0 {
		return
	}
	acc := cBool(accumulate)
	var colp *C.int32_t
	var valp *C.float
	if len(a.ColIdx) > 0 {
		colp = (*C.int32_t)(unsafe.Pointer(&a.ColIdx[0]))
		valp = f32p(a.Val)
	}
	rowp := (*C.int64_t)(unsafe.Pointer(&a.RowPtr[0]))
	bp, cp, lp := f32p(b.Data), f32p(c.Data), i32p(rows)
	n := C.int64_t(b.Cols)
	if ptr != nil {
		rowp = (*C.int64_t)(unsafe.Pointer(&ptr[0]))
	}
	compact := ptr != nil
	if spmmSerial(a, rows) {
		// One piece either way: called here, with no cut points or closure
		// made, since a rank's block products are mostly a few rows each.
		lo, hi := C.int64_t(0), C.int64_t(rowsIn(rows, a.Rows))
		if compact {
			C.sc_spmm_compact(rowp, colp, valp, bp, C.int64_t(b.Rows), cp, n, lo, hi, acc, lp)
		} else {
			C.sc_spmm(rowp, colp, valp, bp, C.int64_t(b.Rows), cp, n, lo, hi, acc, lp)
		}
		return
	}
	var cuts []int
	if rows != nil {
		cuts = evenCuts(len(rows), pieces(), 256)
	} else {
		cuts = nnzCuts(a.RowPtr, pieces())
	}
	forRanges(cuts, func(lo, hi int) {
		if compact {
			C.sc_spmm_compact(rowp, colp, valp, bp, C.int64_t(b.Rows), cp, n, C.int64_t(lo), C.int64_t(hi), acc, lp)
		} else {
			C.sc_spmm(rowp, colp, valp, bp, C.int64_t(b.Rows), cp, n, C.int64_t(lo), C.int64_t(hi), acc, lp)
		}
	})
}

// spmmSerial reports whether spmm's cut is a single range (evenCuts' for a
// list, nnzCuts' for every row): too little work to hand to a thread.
func spmmSerial(a *matrix.CSR, rows []int32) bool {
	if pieces() == 1 {
		return true
	}
	if rows != nil {
		return len(rows) < 2*256
	}
	return a.RowPtr[a.Rows]+int64(a.Rows) < 4096
}

// SIMD reports which instruction set the kernels use on this CPU.
func SIMD() string { return simdNames[C.sc_simd_level()] }

var simdNames = []string{"baseline", "avx2+fma", "avx512"}

// LimitSIMD makes the kernels use at most the named instruction set
// (baseline, avx2+fma, avx512), so tests and benchmarks can run every
// level on one CPU. It is process-wide and cannot be raised again.
func LimitSIMD(name string) {
	for l, n := range simdNames {
		if n == name {
			C.sc_limit_simd(C.int(l))
		}
	}
}

// Triad computes a = b + s·c (the STREAM triad) over all threads; it is the
// memory-bandwidth yardstick the SpMM benchmark is compared against.
func Triad(a, b, c []float32, s float32) {
	inPieces(len(a), 1<<14, func(lo, hi int) {
		C.sc_triad(f32p(a), f32p(b), f32p(c), C.float(s), C.int64_t(lo), C.int64_t(hi))
	})
}

// GatherSum sets C's rows to the sums of the rows of B that A's rows
// gather, Σ_p B[col[p]]: SpMM's own loop (cpu.c's SPMM) without the values
// and their products, the gathers alone, over the same threads. No Â·B can run faster than the gathers it makes, so its
// time bounds SpMM's from below (the kernel benchmark's gather ceiling).
// B's width must be a multiple of 16.
func GatherSum(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense) error {
	if err := CheckMul("gather sum", c, a.Rows, a.Cols, b); err != nil {
		return err
	}
	if b.Cols%16 != 0 {
		return fmt.Errorf("gather sum: width %d is not a multiple of 16", b.Cols)
	}
	if a.Rows == 0 || b.Cols == 0 || a.NNZ() == 0 {
		return nil
	}
	colp := (*C.int32_t)(unsafe.Pointer(&a.ColIdx[0]))
	rowp := (*C.int64_t)(unsafe.Pointer(&a.RowPtr[0]))
	byNonzeros(a.RowPtr, func(lo, hi int) {
		C.sc_gather_sum(rowp, colp, f32p(b.Data), f32p(c.Data), C.int64_t(b.Cols), C.int64_t(lo), C.int64_t(hi))
	})
	return nil
}

// SumRepeated returns reps·Σx, each thread reading its part of x reps
// times in order: the sequential read rate it reaches on an array the size
// of H bounds what an SpMM's gathers from H can reach (the kernel
// benchmark's ceiling column). The repeats stay inside the kernel, so a
// small array's rate is not the threads' hand-off. The parts are one a
// thread, not the kernels' smaller pieces: a piece read again and again
// would stay in a cache that a thread's part of H does not fit.
func SumRepeated(x []float32, reps int) float64 {
	cuts := evenCuts(len(x), threads, 1<<14)
	parts := make([]float64, len(cuts)-1)
	forRanges(cuts, func(lo, hi int) {
		t, _ := slices.BinarySearch(cuts, lo)
		parts[t] = float64(C.sc_sum(f32p(x), C.int64_t(lo), C.int64_t(hi), C.int64_t(reps)))
	})
	var s float64
	for _, p := range parts {
		s += p
	}
	return s
}

// ColumnRange is one range of B's rows, [Lo, Hi), for SpMMColumns: the
// rows of C it forms (Rows; nil: every row of A), with, where Ptr is set,
// their own pointers (OccupiedRows), and Cursor, one a row formed, where
// each row's nonzeros for the next range start (First: at the row's
// first).
type ColumnRange struct {
	Lo, Hi int
	Rows   []int32
	Ptr    []int64
	Cursor []int64
	First  bool
}

// SpMMColumns is SpMM (SpMMRows, SpMMOccupied with r.Ptr) over the rows
// [r.Lo, r.Hi) of B alone, b holding those rows: each row of C adds the
// products of its nonzeros whose columns fall in the range. Over
// successive ranges, the first with r.First and accumulate as SpMM's
// (the others accumulating), it leaves C as one SpMM over all of B does,
// bit for bit, where each of A's rows lists its columns ascending: each
// row sums its nonzeros in their order. A product of a block kept encoded
// decodes one range of its rows at a time into a small buffer.
func SpMMColumns(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, r ColumnRange, accumulate bool) error {
	const what = "spmm over a range of B's rows"
	if r.Lo < 0 || r.Hi < r.Lo || r.Hi > a.Cols || b.Rows != r.Hi-r.Lo || b.Cols != c.Cols || c.Rows != a.Rows {
		return fmt.Errorf("%s: rows [%d, %d) of %d in a %d×%d B, C %d×%d for A %d×%d", what, r.Lo, r.Hi, a.Cols, b.Rows, b.Cols, c.Rows, c.Cols, a.Rows, a.Cols)
	}
	if err := checkRows(nil, what, r.Rows, a.Rows); err != nil {
		return err
	}
	n := rowsIn(r.Rows, a.Rows)
	if r.Rows != nil && r.Ptr != nil && len(r.Ptr) != len(r.Rows)+1 {
		return fmt.Errorf("%s: %d row pointers for %d rows", what, len(r.Ptr), len(r.Rows))
	}
	if len(r.Cursor) < n {
		return fmt.Errorf("%s: %d cursors for %d rows", what, len(r.Cursor), n)
	}
	if n == 0 || b.Cols == 0 {
		return nil
	}
	var colp *C.int32_t
	var valp *C.float
	if len(a.ColIdx) > 0 {
		colp, valp = (*C.int32_t)(unsafe.Pointer(&a.ColIdx[0])), f32p(a.Val)
	}
	rowp, compact := (*C.int64_t)(unsafe.Pointer(&a.RowPtr[0])), C.int(0)
	if r.Ptr != nil {
		rowp, compact = (*C.int64_t)(unsafe.Pointer(&r.Ptr[0])), 1
	}
	bp, cp, lp, curp := f32p(b.Data), f32p(c.Data), i32p(r.Rows), (*C.int64_t)(unsafe.Pointer(&r.Cursor[0]))
	lo, hi, w, acc, first := C.int64_t(r.Lo), C.int64_t(r.Hi), C.int64_t(b.Cols), cBool(accumulate), cBool(r.First)
	run := func(i0, i1 int) {
		C.sc_spmm_cols(rowp, colp, valp, bp, lo, hi, cp, w, C.int64_t(i0), C.int64_t(i1), acc, lp, compact, curp, first)
	}
	if spmmSerial(a, r.Rows) {
		run(0, n)
		return nil
	}
	var cuts []int
	if r.Rows != nil {
		cuts = evenCuts(n, pieces(), 256)
	} else {
		cuts = nnzCuts(a.RowPtr, pieces())
	}
	forRanges(cuts, run)
	return nil
}

// SortedColumns reports whether each of a's rows lists its columns
// ascending, as SpMMColumns needs to sum in SpMM's order.
func SortedColumns(a *matrix.CSR) bool {
	for r := range a.Rows {
		for p := a.RowPtr[r] + 1; p < a.RowPtr[r+1]; p++ {
			if a.ColIdx[p] < a.ColIdx[p-1] {
				return false
			}
		}
	}
	return true
}

// Columner is what a backend may add: a product over a range of B's rows
// (SpMMColumns). Find it with ColumnsOf; a backend without it multiplies
// a block kept encoded decoded whole.
type Columner interface {
	SpMMColumns(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, r ColumnRange, accumulate bool) error
}

// ColumnsOf returns be's Columner, if it has one (not through Timed).
func ColumnsOf(be Backend) (Columner, bool) { return optional[Columner](be) }

func (CPU) SpMMColumns(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, r ColumnRange, accumulate bool) error {
	return SpMMColumns(c, a, b, r, accumulate)
}

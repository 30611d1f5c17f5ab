package kernels

/*
#include "cpu.h"
*/
import "C"
import (
	"fmt"
	"slices"
	"sync"

	"sancus/kernels/matrix"
)

// GEMM computes C = A·B (or C += A·B): A m×k, B k×n, C m×n. It is tuned for
// the GNN shape: many rows, narrow k and n, so B stays in L1/L2.
func GEMM(c, a, b *matrix.Dense, accumulate bool) error {
	return GEMMDrop(c, a, b, matrix.Mask{}, accumulate)
}

// GEMMDrop computes C = M(A)·B (or +=), M the dropout mask m drawn as A's
// rows are read: the dropped A is never written out.
func GEMMDrop(c, a, b *matrix.Dense, m matrix.Mask, accumulate bool) error {
	return gemmDrop(c, a, b, m, nil, accumulate)
}

// gemmDrop is GEMMDrop whose draws, with a record, are kept there or read
// back from there (keptBits).
func gemmDrop(c, a, b *matrix.Dense, m matrix.Mask, kept *keptBits, accumulate bool) error {
	if err := CheckMul("gemm", c, a.Rows, a.Cols, b); err != nil {
		return err
	}
	if a.Rows == 0 || c.Cols == 0 {
		return nil
	}
	if a.Cols == 0 {
		if !accumulate {
			c.Zero()
		}
		return nil
	}
	acc := cBool(accumulate)
	k, n := C.int64_t(a.Cols), C.int64_t(b.Cols)
	cm, done := kept.cMask(m, recordBits)
	defer done()
	inPieces(a.Rows, 256, func(lo, hi int) {
		C.sc_gemm_nn(f32p(a.Data), f32p(b.Data), f32p(c.Data), k, n, C.int64_t(lo), C.int64_t(hi), acc, cm)
	})
	return nil
}

// GEMMNT computes C = A·Bᵀ: A m×n, B k×n, C m×k.
func GEMMNT(c, a, b *matrix.Dense) error {
	if err := CheckMulNT("gemm A·Bᵀ", c, a, b); err != nil {
		return err
	}
	return GEMM(c, a, b.T(), false)
}

// tnChunk is the fixed row-chunk size of the reductions over rows (Aᵀ·B,
// column sums). Partial sums are per chunk, not per thread, and are added
// in chunk order, so the result is the same for any thread count.
const tnChunk = 4096

// sumChunks sets out to the sum over rows [0, rows) of what f writes into
// part (len(out), zeroed by f) for each chunk [r0, r1).
func sumChunks(out []float32, rows int, f func(r0, r1 int, part []float32)) {
	n := len(out)
	chunks := (rows + tnChunk - 1) / tnChunk
	if chunks == 0 || n == 0 {
		clear(out)
		return
	}
	partial := partials.get(chunks * n)
	defer partials.put(partial)
	inPieces(chunks, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			f(ch*tnChunk, min((ch+1)*tnChunk, rows), partial[ch*n:(ch+1)*n])
		}
	})
	// The partials summed in chunk order, as the column sums of a chunks×n matrix.
	C.sc_column_sums(f32p(partial), C.int64_t(n), 0, C.int64_t(chunks), nil, f32p(out))
}

// partials are sumChunks' buffers, kept between calls: a weight gradient
// is formed every epoch, and fresh partial sums were most of an epoch's
// garbage (a long run's heap grew by them until the collector ran). A
// sync.Pool lost them whenever the caller moved to another P, or the
// collector ran twice: there are as many as calls run at once, so a plain
// free list keeps them all.
var partials freeList

type freeList struct {
	mu   sync.Mutex
	free [][]float32
}

// get returns the smallest free buffer that holds n, or a new one in place
// of a free one too small (so the list holds no more buffers than calls
// have run at once).
func (l *freeList) get(n int) []float32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	best := -1
	for i, b := range l.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(l.free[best])) {
			best = i
		}
	}
	if best < 0 {
		if k := len(l.free); k > 0 {
			l.free[k-1] = nil
			l.free = l.free[:k-1]
		}
		return make([]float32, n)
	}
	b := l.free[best]
	l.free = slices.Delete(l.free, best, best+1)
	return b[:n]
}

func (l *freeList) put(b []float32) {
	l.mu.Lock()
	l.free = append(l.free, b)
	l.mu.Unlock()
}

// GEMMTN computes C = Aᵀ·B: A m×k, B m×n, C k×n (a weight gradient).
func GEMMTN(c, a, b *matrix.Dense) error { return GEMMTNDrop(c, a, b, matrix.Mask{}) }

// GEMMTNDrop computes C = M(A)ᵀ·B, drawing mask m as GEMMDrop does: the
// backward pass redraws the forward pass's mask instead of keeping it.
func GEMMTNDrop(c, a, b *matrix.Dense, mask matrix.Mask) error {
	return gemmTNDrop(c, a, b, mask, nil)
}

func gemmTNDrop(c, a, b *matrix.Dense, mask matrix.Mask, kept *keptBits) error {
	if err := CheckMulTN("gemm Aᵀ·B", c, a.Rows, a.Cols, b); err != nil {
		return err
	}
	c.Zero()
	if a.Rows == 0 || len(c.Data) == 0 {
		return nil
	}
	k, n := C.int64_t(a.Cols), C.int64_t(b.Cols)
	cm, done := kept.cMask(mask, replayBits)
	defer done()
	sumChunks(c.Data, a.Rows, func(r0, r1 int, part []float32) {
		C.sc_gemm_tn(f32p(a.Data), f32p(b.Data), f32p(part), k, n, C.int64_t(r0), C.int64_t(r1), cm)
	})
	return nil
}

// checkRows passes on a product's shape error, else checks its row list
// against the n rows it indexes.
func checkRows(shapes error, what string, rows []int32, n int) error {
	if shapes != nil {
		return shapes
	}
	if len(rows) == 0 {
		return nil
	}
	// In C: layer 1's lists are as long as the rows, checked every product;
	// a short list (a block's few occupied rows) is checked here, cheaper
	// than the call.
	if len(rows) <= 64 {
		for i, r := range rows {
			if r < 0 || int(r) >= n {
				return fmt.Errorf("%s: row list entry %d is %d, outside 0..%d", what, i, r, n-1)
			}
		}
		return nil
	}
	if i := int(C.sc_first_bad_row((*C.int32_t)(&rows[0]), C.int64_t(len(rows)), C.int64_t(n))); i >= 0 {
		return fmt.Errorf("%s: row list entry %d is %d, outside 0..%d", what, i, rows[i], n-1)
	}
	return nil
}

// GEMMRows computes C = A·B at the listed rows only; C's other rows are
// left as they are. Each listed row is formed exactly as GEMM forms it.
func GEMMRows(c, a, b *matrix.Dense, rows []int32) error {
	return GEMMRowsDrop(c, a, b, matrix.Mask{}, rows)
}

// GEMMRowsDrop is GEMMRows of M(A), the mask drawn as GEMMDrop draws it.
func GEMMRowsDrop(c, a, b *matrix.Dense, m matrix.Mask, rows []int32) error {
	return GEMMRowsDropBiasReLU(c, a, b, m, nil, rows)
}

// GEMMRowsDropBiasReLU is GEMMRowsDrop with, when bias is not nil, the
// bias added and ReLU applied to each listed row as it is written: what
// AddBiasReLURows would then leave there, without another pass over C.
func GEMMRowsDropBiasReLU(c, a, b *matrix.Dense, m matrix.Mask, bias []float32, rows []int32) error {
	return GEMMRowsDropBiasReLUThen(c, a, b, m, bias, rows, matrix.Mask{}, nil)
}

// GEMMRowsDropBiasReLUThen is GEMMRowsDropBiasReLU that, with a bias and
// then.P > 0, also writes each listed row of C dropped by then into the
// same row of dropped (what DropoutRows(then, dropped, c, rows) would
// write): the next layer's input as it reads it, formed while the row is
// in cache, so that layer neither draws the mask again nor rereads C.
func GEMMRowsDropBiasReLUThen(c, a, b *matrix.Dense, m matrix.Mask, bias []float32, rows []int32, then matrix.Mask, dropped *matrix.Dense) error {
	return gemmRowsDrop(c, a, b, m, nil, bias, rows, then, dropped)
}

func gemmRowsDrop(c, a, b *matrix.Dense, m matrix.Mask, kept *keptBits, bias []float32, rows []int32, then matrix.Mask, dropped *matrix.Dense) error {
	const what = "gemm at rows"
	shapes := CheckMul(what, c, a.Rows, a.Cols, b)
	if shapes == nil && bias != nil && len(bias) != c.Cols {
		shapes = fmt.Errorf("%s: bias of %d for %d columns", what, len(bias), c.Cols)
	}
	withThen := then.P > 0
	switch {
	case shapes != nil || !withThen:
	case bias == nil: // the copy is written in the bias and ReLU epilogue
		shapes = fmt.Errorf("%s: a dropped copy without bias and ReLU", what)
	case dropped == nil || dropped.Rows != c.Rows || dropped.Cols != c.Cols:
		shapes = fmt.Errorf("%s: dropped copy not %d×%d", what, c.Rows, c.Cols)
	}
	if err := checkRows(shapes, what, rows, a.Rows); err != nil {
		return err
	}
	if len(rows) == 0 || c.Cols == 0 {
		return nil
	}
	k, n := C.int64_t(a.Cols), C.int64_t(b.Cols)
	cm, done := kept.cMask(m, recordBits)
	defer done()
	var tm *C.sc_mask
	var dp *C.float
	if withThen {
		var doneThen func()
		tm, doneThen = cMask(then)
		defer doneThen()
		dp = f32p(dropped.Data)
	}
	inPieces(len(rows), 256, func(lo, hi int) {
		C.sc_gemm_nn_rows(f32p(a.Data), f32p(b.Data), f32p(c.Data), k, n, (*C.int32_t)(&rows[lo]), C.int64_t(hi-lo), cm, f32p(bias), tm, dp)
	})
	return nil
}

// GEMMNTRows computes C = A·Bᵀ at the listed rows only.
func GEMMNTRows(c, a, b *matrix.Dense, rows []int32) error {
	if err := CheckMulNT("gemm A·Bᵀ at rows", c, a, b); err != nil {
		return err
	}
	return GEMMRows(c, a, b.T(), rows)
}

// GEMMTNRows computes C = Aᵀ·B summed over the listed rows of A and B only:
// GEMMTN of A and B with every other row zero, summed in list order by
// fixed chunks (the same for any thread count).
func GEMMTNRows(c, a, b *matrix.Dense, rows []int32) error {
	return GEMMTNRowsDrop(c, a, b, matrix.Mask{}, rows)
}

// GEMMTNRowsDrop is GEMMTNRows of M(A), the mask drawn as GEMMDrop draws it.
func GEMMTNRowsDrop(c, a, b *matrix.Dense, m matrix.Mask, rows []int32) error {
	return gemmTNRowsDrop(c, a, b, m, nil, rows)
}

func gemmTNRowsDrop(c, a, b *matrix.Dense, m matrix.Mask, kept *keptBits, rows []int32) error {
	const what = "gemm Aᵀ·B at rows"
	if err := checkRows(CheckMulTN(what, c, a.Rows, a.Cols, b), what, rows, a.Rows); err != nil {
		return err
	}
	c.Zero()
	if len(rows) == 0 || len(c.Data) == 0 {
		return nil
	}
	k, n := C.int64_t(a.Cols), C.int64_t(b.Cols)
	cm, done := kept.cMask(m, replayBits)
	defer done()
	sumChunks(c.Data, len(rows), func(r0, r1 int, part []float32) {
		C.sc_gemm_tn_rows(f32p(a.Data), f32p(b.Data), f32p(part), k, n, (*C.int32_t)(&rows[r0]), C.int64_t(r1-r0), cm)
	})
	return nil
}

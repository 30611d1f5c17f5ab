// Package matrix holds the data types every layer of sancus shares: dense and
// CSR float32 matrices and dropout masks. It is pure Go and imports nothing
// of sancus, so readers, partitioners, transports and kernels all build on it.
package matrix

import (
	"fmt"
	"unsafe"
)

// Dense is a row-major float32 matrix.
type Dense struct {
	Rows, Cols int
	Data       []float32
	// Dev is a device backend's copy of the values (nil on the CPU); Data
	// is then the host side, current only after Backend.Download.
	Dev any
}

// NewDense allocates a zeroed rows×cols matrix.
func NewDense(rows, cols int) *Dense {
	return &Dense{Rows: rows, Cols: cols, Data: Make[float32](rows * cols)}
}

// Row returns row r as a slice that aliases the matrix.
func (d *Dense) Row(r int) []float32 { return d.Data[r*d.Cols : (r+1)*d.Cols] }

// RowBlock returns rows [r0, r1) as a matrix that aliases d.
func (d *Dense) RowBlock(r0, r1 int) *Dense {
	return &Dense{Rows: r1 - r0, Cols: d.Cols, Data: d.Data[r0*d.Cols : r1*d.Cols]}
}

// Prefix returns the first rows rows as a matrix that aliases d, on the
// host and on the device.
func (d *Dense) Prefix(rows int) *Dense {
	return &Dense{Rows: rows, Cols: d.Cols, Data: d.Data[:rows*d.Cols], Dev: d.Dev}
}

// Clone returns a deep copy.
func (d *Dense) Clone() *Dense {
	return &Dense{Rows: d.Rows, Cols: d.Cols, Data: append([]float32(nil), d.Data...)}
}

// Zero sets every element to 0.
func (d *Dense) Zero() { clear(d.Data) }

// T returns the transpose as a new matrix.
func (d *Dense) T() *Dense {
	t := NewDense(d.Cols, d.Rows)
	for r := 0; r < d.Rows; r++ {
		for c := 0; c < d.Cols; c++ {
			t.Data[c*d.Rows+r] = d.Data[r*d.Cols+c]
		}
	}
	return t
}

// CSR is a compressed-sparse-row float32 matrix. RowPtr has Rows+1 entries;
// column indices of a row are sorted and unique.
type CSR struct {
	Rows, Cols int
	RowPtr     []int64
	ColIdx     []int32
	Val        []float32
}

// NNZ is the number of stored entries.
func (a *CSR) NNZ() int64 { return a.RowPtr[a.Rows] }

// Validate checks the structural invariants, so that a corrupt shard or a bad
// reader is reported instead of crashing a kernel.
func (a *CSR) Validate() error {
	if len(a.RowPtr) != a.Rows+1 || a.RowPtr[0] != 0 {
		return fmt.Errorf("csr: row pointer has %d entries for %d rows", len(a.RowPtr), a.Rows)
	}
	nnz := a.RowPtr[a.Rows]
	if int64(len(a.ColIdx)) != nnz || int64(len(a.Val)) != nnz {
		return fmt.Errorf("csr: %d nonzeros but %d column indices and %d values", nnz, len(a.ColIdx), len(a.Val))
	}
	for r := 0; r < a.Rows; r++ {
		if a.RowPtr[r+1] < a.RowPtr[r] || a.RowPtr[r+1] > nnz {
			return fmt.Errorf("csr: row pointer at row %d is %d, outside %d..%d", r, a.RowPtr[r+1], a.RowPtr[r], nnz)
		}
		for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
			if c := a.ColIdx[p]; c < 0 || int(c) >= a.Cols {
				return fmt.Errorf("csr: row %d has column %d outside [0,%d)", r, c, a.Cols)
			}
		}
	}
	return nil
}

// Transpose returns Aᵀ in CSR form (used so backward passes are plain SpMMs).
func (a *CSR) Transpose() *CSR {
	t := &CSR{Rows: a.Cols, Cols: a.Rows, RowPtr: make([]int64, a.Cols+1)}
	nnz := a.NNZ()
	t.ColIdx = make([]int32, nnz)
	t.Val = make([]float32, nnz)
	for _, c := range a.ColIdx {
		t.RowPtr[c+1]++
	}
	for i := 0; i < a.Cols; i++ {
		t.RowPtr[i+1] += t.RowPtr[i]
	}
	next := append([]int64(nil), t.RowPtr[:a.Cols]...)
	for r := 0; r < a.Rows; r++ {
		for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
			c := a.ColIdx[p]
			q := next[c]
			next[c]++
			t.ColIdx[q] = int32(r)
			t.Val[q] = a.Val[p]
		}
	}
	return t
}

// ToDense expands the matrix.
func (a *CSR) ToDense() *Dense {
	d := NewDense(a.Rows, a.Cols)
	for r := 0; r < a.Rows; r++ {
		for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
			d.Data[r*a.Cols+int(a.ColIdx[p])] += a.Val[p]
		}
	}
	return d
}

// RowSlice returns rows [r0, r1) as a new CSR with its own row pointer and
// shared column/value storage.
func (a *CSR) RowSlice(r0, r1 int) *CSR {
	rp := make([]int64, r1-r0+1)
	base := a.RowPtr[r0]
	for i := range rp {
		rp[i] = a.RowPtr[r0+i] - base
	}
	return &CSR{Rows: r1 - r0, Cols: a.Cols, RowPtr: rp,
		ColIdx: a.ColIdx[base:a.RowPtr[r1]], Val: a.Val[base:a.RowPtr[r1]]}
}

// SelectRows returns the listed rows, in order, as a new CSR.
func (a *CSR) SelectRows(rows []int32) *CSR {
	out := &CSR{Rows: len(rows), Cols: a.Cols, RowPtr: make([]int64, len(rows)+1)}
	for i, r := range rows {
		p0, p1 := a.RowPtr[r], a.RowPtr[r+1]
		out.ColIdx = append(out.ColIdx, a.ColIdx[p0:p1]...)
		out.Val = append(out.Val, a.Val[p0:p1]...)
		out.RowPtr[i+1] = int64(len(out.ColIdx))
	}
	return out
}

// Keep returns a with the entries outside the kept rows and columns
// removed, its shape unchanged (nil keeps every row, or every column).
func (a *CSR) Keep(rows, cols []bool) *CSR {
	out := &CSR{Rows: a.Rows, Cols: a.Cols, RowPtr: make([]int64, a.Rows+1)}
	n := 0
	for r := range a.Rows {
		if rows == nil || rows[r] {
			for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
				if cols == nil || cols[a.ColIdx[p]] {
					n++
				}
			}
		}
	}
	out.ColIdx, out.Val = make([]int32, 0, n), make([]float32, 0, n)
	for r := range a.Rows {
		if rows == nil || rows[r] {
			for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
				if c := a.ColIdx[p]; cols == nil || cols[c] {
					out.ColIdx, out.Val = append(out.ColIdx, c), append(out.Val, a.Val[p])
				}
			}
		}
		out.RowPtr[r+1] = int64(len(out.ColIdx))
	}
	return out
}

// Bytes is the memory a's arrays take (0 for nil).
func (a *CSR) Bytes() int64 {
	if a == nil {
		return 0
	}
	return 8*int64(len(a.RowPtr)) + 4*int64(len(a.ColIdx)) + 4*int64(len(a.Val))
}

// DenseThreshold is the density above which a CSR is cheaper kept dense:
// a dense value is 4 bytes and streams twice as fast as a CSR entry's 8.
const DenseThreshold = 0.25

// DenseEnough reports whether a's density exceeds DenseThreshold.
func (a *CSR) DenseEnough() bool {
	return a.Rows > 0 && a.Cols > 0 && float64(a.NNZ()) > DenseThreshold*float64(a.Rows)*float64(a.Cols)
}

// hugeMin is the size from which arrays are backed by huge pages.
const hugeMin = 4 << 20

// Make returns a zeroed slice of n elements; a large one is backed by
// transparent huge pages. Products gather rows of large arrays at random
// (H's rows in SpMM, the training rows in the loss), and with 4 KiB pages
// nearly every gather of a 100 MB array also misses the TLB; huge pages
// also mean fewer page faults while a shard loads, at the same peak memory.
func Make[T float32 | int32 | int64](n int) []T {
	s := make([]T, n)
	if b := uintptr(n) * unsafe.Sizeof(s[0]); n > 0 && b >= hugeMin {
		adviseHuge(unsafe.Pointer(&s[0]), b)
	}
	return s
}

package graph

import (
	"fmt"
	"math"
	"sancus/kernels/matrix"
	"slices"
)

// BuildAdjacency returns the symmetric pattern adjacency A of e in CSR form:
// both directions of every edge, duplicates and self loops dropped, columns
// sorted. Values are 1.
func BuildAdjacency(e *Edges) (*matrix.CSR, error) {
	n := e.N
	deg := make([]int64, n+1)
	for i := range e.Src {
		u, v := e.Src[i], e.Dst[i]
		if u < 0 || v < 0 || int(u) >= n || int(v) >= n {
			return nil, fmt.Errorf("edge %d (%d,%d) outside 0..%d", i, u, v, n-1)
		}
		if u == v {
			continue
		}
		deg[u+1]++
		deg[v+1]++
	}
	for i := 0; i < n; i++ {
		deg[i+1] += deg[i]
	}
	col := make([]int32, deg[n])
	next := append([]int64(nil), deg[:n]...)
	for i := range e.Src {
		u, v := e.Src[i], e.Dst[i]
		if u == v {
			continue
		}
		col[next[u]] = v
		next[u]++
		col[next[v]] = u
		next[v]++
	}
	// Sort and deduplicate each row, compacting in place.
	rowptr := make([]int64, n+1)
	w := int64(0)
	for r := 0; r < n; r++ {
		row := col[deg[r]:deg[r+1]]
		slices.Sort(row)
		row = slices.Compact(row)
		copy(col[w:], row)
		w += int64(len(row))
		rowptr[r+1] = w
	}
	col = col[:w:w]
	val := make([]float32, w)
	for i := range val {
		val[i] = 1
	}
	return &matrix.CSR{Rows: n, Cols: n, RowPtr: rowptr, ColIdx: col, Val: val}, nil
}

// Normalize returns Â = D^-1/2 (A+I) D^-1/2 where D is the degree of A+I.
func Normalize(a *matrix.CSR) *matrix.CSR {
	n := a.Rows
	dinv := make([]float64, n)
	for r := 0; r < n; r++ {
		dinv[r] = 1 / math.Sqrt(float64(a.RowPtr[r+1]-a.RowPtr[r]+1))
	}
	return NormalizeRows(a, 0, dinv)
}

// NormalizeRows turns pattern rows of A (row i is global row row0+i, columns
// global) into the same rows of Â = D^-1/2 (A+I) D^-1/2, given
// dinv[v] = 1/√deg(v) of A+I for every node: one row block of a graph
// prepared in parts gets exactly the values Normalize gives.
func NormalizeRows(a *matrix.CSR, row0 int64, dinv []float64) *matrix.CSR {
	out := &matrix.CSR{Rows: a.Rows, Cols: a.Cols, RowPtr: make([]int64, a.Rows+1)}
	out.ColIdx = make([]int32, 0, a.NNZ()+int64(a.Rows))
	out.Val = make([]float32, 0, a.NNZ()+int64(a.Rows))
	for i := 0; i < a.Rows; i++ {
		r := int(row0) + i
		self := false
		for p := a.RowPtr[i]; p < a.RowPtr[i+1]; p++ {
			c := a.ColIdx[p]
			if !self && int(c) > r { // keep columns sorted: insert the diagonal in place
				out.ColIdx = append(out.ColIdx, int32(r))
				out.Val = append(out.Val, float32(dinv[r]*dinv[r]))
				self = true
			}
			out.ColIdx = append(out.ColIdx, c)
			out.Val = append(out.Val, float32(dinv[r]*dinv[c]))
		}
		if !self {
			out.ColIdx = append(out.ColIdx, int32(r))
			out.Val = append(out.Val, float32(dinv[r]*dinv[r]))
		}
		out.RowPtr[i+1] = int64(len(out.ColIdx))
	}
	return out
}

// MeanWeights are the entries of M = D⁻¹A, 1/deg(A), for the rows of Â
// cut into column blocks (each row holding its self loop, which is not a
// neighbour); 0 for a row without neighbours.
func MeanWeights(blocks []*matrix.CSR) []float32 {
	rows := blocks[0].Rows
	deg := make([]int64, rows)
	for _, b := range blocks {
		for r := range rows {
			deg[r] += b.RowPtr[r+1] - b.RowPtr[r]
		}
	}
	w := make([]float32, rows)
	for r, d := range deg {
		if d > 1 {
			w[r] = 1 / float32(d-1)
		}
	}
	return w
}

// SpGEMMBlocks computes A·B for A given as column blocks side by side:
// blocks[j] holds A's columns off[j] .. off[j+1], numbered from 0. Each
// row's products are summed in A's column order, so the result is the
// same bit for bit however A is cut into blocks.
func SpGEMMBlocks(blocks []*matrix.CSR, off []int64, b *matrix.CSR) (*matrix.CSR, error) {
	if len(blocks) == 0 || len(off) != len(blocks)+1 || off[len(blocks)] != int64(b.Rows) {
		return nil, fmt.Errorf("spgemm: %d column blocks with %d offsets against %d rows of B", len(blocks), len(off), b.Rows)
	}
	rows := blocks[0].Rows
	for j, blk := range blocks {
		if blk.Rows != rows || int64(blk.Cols) != off[j+1]-off[j] {
			return nil, fmt.Errorf("spgemm: block %d is %dx%d, want %dx%d", j, blk.Rows, blk.Cols, rows, off[j+1]-off[j])
		}
	}
	out := &matrix.CSR{Rows: rows, Cols: b.Cols, RowPtr: make([]int64, rows+1)}
	acc := make([]float32, b.Cols)
	mark := make([]bool, b.Cols)
	var cols []int32
	// each returns row r's distinct columns (unsorted), with its products
	// summed into acc when values is set; mark is left set on them.
	each := func(r int, values bool) []int32 {
		cols = cols[:0]
		for j, a := range blocks {
			for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
				k, av := int64(a.ColIdx[p])+off[j], a.Val[p]
				for q := b.RowPtr[k]; q < b.RowPtr[k+1]; q++ {
					c := b.ColIdx[q]
					if !mark[c] {
						mark[c] = true
						cols = append(cols, c)
					}
					if values {
						acc[c] += av * b.Val[q]
					}
				}
			}
		}
		return cols
	}
	// A symbolic pass counts each row's entries first, so the output is
	// allocated once at its exact size: appending would leave up to a
	// whole copy of it as garbage, the peak of prepare's memory.
	for r := 0; r < rows; r++ {
		row := each(r, false)
		for _, c := range row {
			mark[c] = false
		}
		out.RowPtr[r+1] = out.RowPtr[r] + int64(len(row))
	}
	nnz := out.RowPtr[rows]
	out.ColIdx, out.Val = make([]int32, nnz), make([]float32, nnz)
	for r := 0; r < rows; r++ {
		row := each(r, true)
		slices.Sort(row)
		at := out.RowPtr[r]
		for i, c := range row {
			out.ColIdx[at+int64(i)], out.Val[at+int64(i)] = c, acc[c]
			acc[c], mark[c] = 0, false
		}
	}
	return out, nil
}

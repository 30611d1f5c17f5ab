package kernels

import (
	"fmt"
	"sancus/kernels/matrix"
)

// Operand is a row block that is kept sparse or dense, whichever is cheaper:
// input features X_i and the precomputed (ÂX)_i. Wide bag-of-words features
// stay sparse (wordnet dense would need 8.5 GB); dense-ish ones are
// expanded, since a dense row streams twice as fast as CSR.
type Operand struct {
	sparse *matrix.CSR
	dense  *matrix.Dense

	// Sparse dropout works on a copy of the values so the originals
	// survive for the next epoch; dense dropout is drawn inside the
	// products (GEMMDrop), so a dense operand is never copied.
	dropVals []float32
	cur      *matrix.CSR // sparse matrix with the current (possibly dropped) values
	mask     matrix.Mask // the current mask of a dense operand
	kept     *keptBits   // its draws as the forward made them, for the backward

	// Aᵀ for the weight gradient: structure built once, values refreshed.
	tr     *matrix.CSR
	trPerm []int64
	gen    int // bumped by SetDropout
	trGen  int // gen that tr's values were refreshed at (-1: never)
}

// NewOperand wraps a matrix.CSR, expanding it when its density exceeds
// matrix.DenseThreshold.
func NewOperand(a *matrix.CSR) *Operand {
	if a.DenseEnough() {
		return NewDenseOperand(a.ToDense())
	}
	return &Operand{sparse: a, cur: a}
}

// NewDenseOperand wraps a dense matrix.
func NewDenseOperand(d *matrix.Dense) *Operand { return &Operand{dense: d} }

// Sparse is the matrix.CSR with its original values (nil when stored dense).
func (o *Operand) Sparse() *matrix.CSR { return o.sparse }

// DenseValues is the dense matrix with its original values (nil when sparse).
func (o *Operand) DenseValues() *matrix.Dense { return o.dense }

// IsSparse reports the storage chosen.
func (o *Operand) IsSparse() bool { return o.sparse != nil }

// Rows of the operand.
func (o *Operand) Rows() int {
	if o.sparse != nil {
		return o.sparse.Rows
	}
	return o.dense.Rows
}

// Cols of the operand.
func (o *Operand) Cols() int {
	if o.sparse != nil {
		return o.sparse.Cols
	}
	return o.dense.Cols
}

// NNZ is the number of stored values (rows·cols when dense).
func (o *Operand) NNZ() int64 {
	if o.sparse != nil {
		return o.sparse.NNZ()
	}
	return int64(len(o.dense.Data))
}

// Bytes is the memory the operand's values and indices take.
func (o *Operand) Bytes() int64 {
	if o.sparse != nil {
		return o.sparse.Bytes()
	}
	return int64(len(o.dense.Data)) * 4
}

// SetDropout makes the following Mul and MulT use the operand with mask m
// applied (m.P == 0 restores the original values).
func (o *Operand) SetDropout(m matrix.Mask) {
	o.gen++
	if o.sparse != nil {
		if m.P <= 0 {
			o.cur = o.sparse
			return
		}
		if o.dropVals == nil {
			o.dropVals = make([]float32, len(o.sparse.Val))
		}
		DropoutCSR(m, o.dropVals, o.sparse)
		o.cur = &matrix.CSR{Rows: o.sparse.Rows, Cols: o.sparse.Cols, RowPtr: o.sparse.RowPtr, ColIdx: o.sparse.ColIdx, Val: o.dropVals}
		return
	}
	o.mask = m
}

// recording is the record a dense forward product keeps its draws in (nil
// where the operand keeps none); the caller marks the rows it drew.
func (o *Operand) recording() *keptBits {
	if o.dense == nil || o.mask.P <= 0 || o.dense.Cols%32 != 0 || o.dense.Rows == 0 {
		return nil
	}
	if o.kept == nil {
		stride := o.dense.Cols / 8
		o.kept = &keptBits{bits: make([]byte, o.dense.Rows*stride), stride: stride, drawn: make([]int, o.dense.Rows)}
	}
	return o.kept
}

// replaying is the record to read the current mask back from, where every
// row a backward product reads (nil: all) was drawn under it; else nil,
// and the product draws again.
func (o *Operand) replaying(rows []int32) *keptBits {
	if k := o.kept; k != nil && o.mask.P > 0 && k.current(rows, o.gen) {
		return k
	}
	return nil
}

// Mul computes c = O·w.
func (o *Operand) Mul(c, w *matrix.Dense) error {
	if o.sparse != nil {
		return SpMM(c, o.cur, w, false)
	}
	return o.mulDense(c, w, false)
}

func (o *Operand) mulDense(c, w *matrix.Dense, acc bool) error {
	kept := o.recording()
	err := gemmDrop(c, o.dense, w, o.mask, kept, acc)
	if err == nil && kept != nil {
		kept.mark(nil, o.gen)
	}
	return err
}

// MulAdd computes c += O·w.
func (o *Operand) MulAdd(c, w *matrix.Dense) error {
	if o.sparse != nil {
		return SpMM(c, o.cur, w, true)
	}
	return o.mulDense(c, w, true)
}

// MulT computes c = Oᵀ·g (a weight gradient).
func (o *Operand) MulT(c, g *matrix.Dense) error {
	if o.sparse == nil {
		return gemmTNDrop(c, o.dense, g, o.mask, o.replaying(nil))
	}
	if o.Rows() != g.Rows {
		return fmt.Errorf("operand Oᵀ·G: %d rows against %d", o.Rows(), g.Rows)
	}
	if o.Cols()*g.Cols <= directTN {
		return SpMMT(c, o.cur, g)
	}
	if o.tr == nil {
		o.buildTranspose()
	}
	if o.trGen != o.gen { // a permutation: the threads write apart
		inPieces(len(o.trPerm), 1<<16, func(lo, hi int) {
			for p := lo; p < hi; p++ {
				o.tr.Val[o.trPerm[p]] = o.cur.Val[p]
			}
		})
		o.trGen = o.gen
	}
	return SpMM(c, o.tr, g, false)
}

// directTN is the largest Oᵀ·G (in floats) that MulT forms from O's rows
// directly: each row chunk sums into a partial that size, which stays in
// L2. A wider one (bag-of-words features) goes through Oᵀ, whose rows sum
// into one row of C at a time.
const directTN = 1 << 16

func (o *Operand) buildTranspose() {
	a := o.sparse
	o.tr = a.Transpose()
	o.trGen = -1 // values are refreshed from the current ones below
	// Record where each entry of A lands in Aᵀ, so values can be refreshed
	// in O(nnz) after each dropout without rebuilding the structure.
	o.trPerm = make([]int64, a.NNZ())
	next := append([]int64(nil), o.tr.RowPtr[:a.Cols]...)
	for r := 0; r < a.Rows; r++ {
		for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
			c := a.ColIdx[p]
			o.trPerm[p] = next[c]
			next[c]++
		}
	}
}

// SelectRows is the operand's listed rows, stored as the operand is.
func (o *Operand) SelectRows(rows []int32) *Operand {
	if o.sparse != nil {
		sp := o.sparse.SelectRows(rows)
		return &Operand{sparse: sp, cur: sp}
	}
	d := matrix.NewDense(len(rows), o.dense.Cols)
	for i, r := range rows {
		copy(d.Row(i), o.dense.Row(int(r)))
	}
	return NewDenseOperand(d)
}

// denseInput is a dense operand on the CPU: the products at a row list
// draw its mask inside them, as Mul and MulT do.
type denseInput struct{ *Operand }

func (d denseInput) MulRows(c, w *matrix.Dense, rows []int32) error {
	return d.MulRowsBiasReLU(c, w, nil, rows, matrix.Mask{}, nil)
}

func (d denseInput) MulRowsBiasReLU(c, w *matrix.Dense, bias []float32, rows []int32, then matrix.Mask, dropped *matrix.Dense) error {
	kept := d.recording()
	err := gemmRowsDrop(c, d.dense, w, d.mask, kept, bias, rows, then, dropped)
	if err == nil && kept != nil && len(rows) > 0 {
		kept.mark(rows, d.gen)
	}
	return err
}

func (d denseInput) MulTRows(c, g *matrix.Dense, rows []int32) error {
	var kept *keptBits
	if len(rows) > 0 { // nil would mean every row
		kept = d.replaying(rows)
	}
	return gemmTNRowsDrop(c, d.dense, g, d.mask, kept, rows)
}

package kernels

import (
	"time"

	"sancus/kernels/matrix"
)

// Timed wraps a backend and adds the wall time of each call to the class
// it belongs to: what an epoch's time breakdown is made of. It times the
// call as issued, so a device backend's figures count only the launches
// unless it synchronizes; the CPU's are the work itself.
//
// It also counts each call's compulsory bytes: every operand read once and
// every result written once (a sum into C reads it too), a CSR's 8 bytes a
// nonzero and 8 a row, a gathered operand whole, however often its rows
// are gathered. Their sum over an epoch over the triad's rate is the
// epoch's memory-bound time. And it counts the products' floating-point
// operations (two a multiply-add, a dropped entry still counted): over a
// GEMM's peak rate, the time the arithmetic alone would take. Elementwise
// work, the loss and the attention count none, so a bound drawn from
// both counts is low, never high.
type Timed struct {
	Backend
	Times  map[string]time.Duration // by TimedClasses
	Counts map[string]Count         // by TimedClasses
}

// Count is what the calls of one class moved and computed.
type Count struct {
	Bytes, Flops int64
}

// TimedClasses are the classes Timed adds time to.
var TimedClasses = []string{"gemm", "spmm", "dropout", "loss", "elementwise", "attention"}

// NewTimed wraps be.
func NewTimed(be Backend) *Timed {
	return &Timed{Backend: be, Times: map[string]time.Duration{}, Counts: map[string]Count{}}
}

// Snapshot is a copy of the counts so far (nil for a nil Timed: the
// engine asks whether it profiles or not).
func (t *Timed) Snapshot() map[string]Count {
	if t == nil {
		return nil
	}
	s := make(map[string]Count, len(t.Counts))
	for k, c := range t.Counts {
		s[k] = c
	}
	return s
}

// op starts timing a call of class that moves bytes and computes flops;
// defer what it returns.
func (t *Timed) op(class string, bytes, flops int64) func() {
	start := time.Now()
	return func() {
		t.Times[class] += time.Since(start)
		c := t.Counts[class]
		c.Bytes += bytes
		c.Flops += flops
		t.Counts[class] = c
	}
}

// mulAdds is the flops of an m×k by k×n product.
func mulAdds(m, k, n int) int64 { return 2 * int64(m) * int64(k) * int64(n) }

// csrFlops is a sparse product's flops: a multiply-add per nonzero (at the
// listed rows, if rows is not nil) per column of the dense operand.
func csrFlops(a *matrix.CSR, rows []int32, cols int) int64 {
	nnz := a.NNZ()
	if rows != nil {
		nnz = 0
		for _, r := range rows {
			nnz += a.RowPtr[r+1] - a.RowPtr[r]
		}
	}
	return 2 * nnz * int64(cols)
}

// sizes is the bytes of whole matrices (nil: none).
func sizes(ds ...*matrix.Dense) int64 {
	var n int64
	for _, d := range ds {
		if d != nil {
			n += 4 * int64(d.Rows) * int64(d.Cols)
		}
	}
	return n
}

// rowBytes is the bytes of n rows of the given widths.
func rowBytes(n int, cols ...int) int64 {
	var w int64
	for _, c := range cols {
		w += int64(c)
	}
	return 4 * int64(n) * w
}

// csrBytes is a CSR's bytes (at the listed rows only, if rows is not nil).
func csrBytes(a *matrix.CSR, rows []int32) int64 {
	if rows == nil {
		return 8*a.NNZ() + 8*int64(a.Rows+1)
	}
	var nnz int64
	for _, r := range rows {
		nnz += a.RowPtr[r+1] - a.RowPtr[r]
	}
	return 8*nnz + 16*int64(len(rows))
}

// summed is the result's bytes read again when a product sums into it.
func summed(out int64, sum bool) int64 {
	if sum {
		return out
	}
	return 0
}

func (s GATState) bytes() int64 { return sizes(s.El, s.M, s.S, s.O, s.O2, s.C) }

func (t *Timed) SpMM(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, sum bool) error {
	defer t.op("spmm", csrBytes(a, nil)+sizes(b, c)+summed(sizes(c), sum), csrFlops(a, nil, c.Cols))()
	return t.Backend.SpMM(c, a, b, sum)
}
func (t *Timed) GEMM(c, a, b *matrix.Dense, sum bool) error {
	defer t.op("gemm", sizes(a, b, c)+summed(sizes(c), sum), mulAdds(a.Rows, a.Cols, b.Cols))()
	return t.Backend.GEMM(c, a, b, sum)
}
func (t *Timed) GEMMTN(c, a, b *matrix.Dense) error {
	defer t.op("gemm", sizes(a, b, c), mulAdds(a.Cols, a.Rows, b.Cols))()
	return t.Backend.GEMMTN(c, a, b)
}
func (t *Timed) GEMMNT(c, a, b *matrix.Dense) error {
	defer t.op("gemm", sizes(a, b, c), mulAdds(a.Rows, a.Cols, b.Rows))()
	return t.Backend.GEMMNT(c, a, b)
}

// The row operations time the wrapped backend's (RowsOf and OccupiedOf
// find them only where it has them).
func (t *Timed) SpMMRows(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, rows []int32, sum bool) error {
	out := rowBytes(len(rows), c.Cols)
	defer t.op("spmm", csrBytes(a, rows)+sizes(b)+out+summed(out, sum), csrFlops(a, rows, c.Cols))()
	return t.Backend.(RowOps).SpMMRows(c, a, b, rows, sum)
}
func (t *Timed) SpMMOccupied(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, o OccupiedRows, sum bool) error {
	out := rowBytes(len(o.Rows), c.Cols)
	defer t.op("spmm", csrBytes(a, o.Rows)+sizes(b)+out+summed(out, sum), csrFlops(a, o.Rows, c.Cols))()
	return t.Backend.(Occupier).SpMMOccupied(c, a, b, o, sum)
}
func (t *Timed) GEMMRows(c, a, b *matrix.Dense, rows []int32) error {
	defer t.op("gemm", rowBytes(len(rows), a.Cols, c.Cols)+sizes(b), mulAdds(len(rows), a.Cols, b.Cols))()
	return t.Backend.(RowOps).GEMMRows(c, a, b, rows)
}
func (t *Timed) GEMMNTRows(c, a, b *matrix.Dense, rows []int32) error {
	defer t.op("gemm", rowBytes(len(rows), a.Cols, c.Cols)+sizes(b), mulAdds(len(rows), a.Cols, b.Rows))()
	return t.Backend.(RowOps).GEMMNTRows(c, a, b, rows)
}
func (t *Timed) GEMMTNRows(c, a, b *matrix.Dense, rows []int32) error {
	defer t.op("gemm", rowBytes(len(rows), a.Cols, b.Cols)+sizes(c), mulAdds(len(rows), a.Cols, b.Cols))()
	return t.Backend.(RowOps).GEMMTNRows(c, a, b, rows)
}
func (t *Timed) AddBiasReLURows(z *matrix.Dense, bias []float32, relu bool, rows []int32) error {
	defer t.op("elementwise", 2*rowBytes(len(rows), z.Cols), 0)()
	return t.Backend.(RowOps).AddBiasReLURows(z, bias, relu, rows)
}
func (t *Timed) ColumnSumsRows(out []float32, g *matrix.Dense, rows []int32) error {
	defer t.op("elementwise", rowBytes(len(rows), g.Cols), 0)()
	return t.Backend.(RowOps).ColumnSumsRows(out, g, rows)
}
func (t *Timed) LossGradRows(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64 {
	defer t.op("loss", rowBytes(len(rows), logits.Cols, grad.Cols, 1), 0)()
	return t.Backend.(RowOps).LossGradRows(logits, labels, rows, norm, grad)
}
func (t *Timed) DropoutRows(m matrix.Mask, dst, src *matrix.Dense, rows []int32) error {
	defer t.op("dropout", rowBytes(len(rows), src.Cols, dst.Cols), 0)()
	return t.Backend.(RowOps).DropoutRows(m, dst, src, rows)
}
func (t *Timed) ZeroOtherRows(m *matrix.Dense, rows []int32) error {
	defer t.op("elementwise", sizes(m)-rowBytes(len(rows), m.Cols), 0)()
	return t.Backend.(RowOps).ZeroOtherRows(m, rows)
}
func (t *Timed) Dropout(m matrix.Mask, dst, src *matrix.Dense) {
	defer t.op("dropout", sizes(src, dst), 0)()
	t.Backend.Dropout(m, dst, src)
}
func (t *Timed) LossGrad(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64 {
	defer t.op("loss", rowBytes(len(rows), logits.Cols, grad.Cols, 1), 0)()
	return t.Backend.LossGrad(logits, labels, rows, norm, grad)
}
func (t *Timed) AddBiasReLU(z *matrix.Dense, bias []float32, relu bool) {
	defer t.op("elementwise", 2*sizes(z), 0)()
	t.Backend.AddBiasReLU(z, bias, relu)
}
func (t *Timed) ReLUBackward(g, h *matrix.Dense) {
	defer t.op("elementwise", 2*sizes(g)+sizes(h), 0)()
	t.Backend.ReLUBackward(g, h)
}
func (t *Timed) Add(a, b *matrix.Dense) {
	defer t.op("elementwise", 2*sizes(a)+sizes(b), 0)()
	t.Backend.(ElementOps).Add(a, b)
}
func (t *Timed) ScaleRows(dst, src *matrix.Dense, s []float32) {
	defer t.op("elementwise", sizes(src, dst), 0)()
	t.Backend.(ElementOps).ScaleRows(dst, src, s)
}
func (t *Timed) ELU(z *matrix.Dense) {
	defer t.op("elementwise", 2*sizes(z), 0)()
	t.Backend.(ELUOps).ELU(z)
}
func (t *Timed) ELUBackward(g, h *matrix.Dense) {
	defer t.op("elementwise", 2*sizes(g)+sizes(h), 0)()
	t.Backend.(ELUOps).ELUBackward(g, h)
}
func (t *Timed) GATPayload(pay, el, u, al, ar *matrix.Dense, h int) {
	defer t.op("attention", sizes(pay, el, u), 0)()
	t.Backend.(Attention).GATPayload(pay, el, u, al, ar, h)
}
func (t *Timed) GATStart(st GATState) {
	defer t.op("attention", st.bytes(), 0)()
	t.Backend.(Attention).GATStart(st)
}
func (t *Timed) GATAttend(b *GATBlock, src *matrix.Dense, st GATState) {
	defer t.op("attention", csrBytes(b.A, nil)+sizes(src)+2*st.bytes(), 0)()
	t.Backend.(Attention).GATAttend(b, src, st)
}
func (t *Timed) GATFinish(z *matrix.Dense, st GATState, h int, concat bool) {
	defer t.op("attention", sizes(z, st.O, st.S), 0)()
	t.Backend.(Attention).GATFinish(z, st, h, concat)
}
func (t *Timed) GATGradRows(gpay, dEl, dEr, g *matrix.Dense, st GATState, h int, concat bool) {
	defer t.op("attention", sizes(gpay, dEl, dEr, g)+st.bytes(), 0)()
	t.Backend.(Attention).GATGradRows(gpay, dEl, dEr, g, st, h, concat)
}
func (t *Timed) GATNeighbour(b *GATBlock, src, own, dU, dEr *matrix.Dense) {
	defer t.op("attention", csrBytes(b.A, nil)+sizes(src, own)+2*sizes(dU, dEr), 0)()
	t.Backend.(Attention).GATNeighbour(b, src, own, dU, dEr)
}
func (t *Timed) GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar *matrix.Dense, h int) {
	defer t.op("attention", 2*sizes(dU)+sizes(dEl, dEr, u, own), 0)()
	t.Backend.(Attention).GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar, h)
}
func (t *Timed) DropoutReLUBackward(m matrix.Mask, g, h *matrix.Dense, sums []float32) {
	defer t.op("dropout", 2*sizes(g)+sizes(h), 0)()
	t.Backend.(Fused).DropoutReLUBackward(m, g, h, sums)
}
func (t *Timed) ReLUDroppedBackward(g, dropped *matrix.Dense, scale float32, sums []float32) error {
	defer t.op("dropout", 2*sizes(g)+sizes(dropped), 0)()
	return t.Backend.(Fused).ReLUDroppedBackward(g, dropped, scale, sums)
}
func (t *Timed) ColumnSums(out []float32, g *matrix.Dense) {
	defer t.op("elementwise", sizes(g), 0)()
	t.Backend.ColumnSums(out, g)
}
func (t *Timed) Copy(dst, src *matrix.Dense) {
	defer t.op("elementwise", sizes(src, dst), 0)()
	t.Backend.Copy(dst, src)
}

// Input times the first layer's products (dropout fused in) as GEMMs, or
// as SpMMs when the operand is kept sparse.
func (t *Timed) Input(o *Operand) (Input, error) {
	in, err := t.Backend.Input(o)
	if err != nil {
		return nil, err
	}
	class := "gemm"
	if o.IsSparse() {
		class = "spmm"
	}
	return timedInput{in, t, class, o}, nil
}

type timedInput struct {
	Input
	t     *Timed
	class string
	o     *Operand
}

// bytes is the operand's bytes (at the listed rows, if rows is not nil).
func (i timedInput) bytes(rows []int32) int64 {
	if i.o.IsSparse() {
		return csrBytes(i.o.Sparse(), rows)
	}
	if rows == nil {
		return rowBytes(i.o.Rows(), i.o.Cols())
	}
	return rowBytes(len(rows), i.o.Cols())
}

// flops is the product's flops with a right operand of cols columns (at
// the listed rows, if rows is not nil).
func (i timedInput) flops(rows []int32, cols int) int64 {
	if i.o.IsSparse() {
		return csrFlops(i.o.Sparse(), rows, cols)
	}
	n := i.o.Rows()
	if rows != nil {
		n = len(rows)
	}
	return mulAdds(n, i.o.Cols(), cols)
}

func (i timedInput) Mul(c, w *matrix.Dense) error {
	defer i.t.op(i.class, i.bytes(nil)+sizes(c, w), i.flops(nil, w.Cols))()
	return i.Input.Mul(c, w)
}
func (i timedInput) MulAdd(c, w *matrix.Dense) error {
	defer i.t.op(i.class, i.bytes(nil)+sizes(c, w)+summed(sizes(c), true), i.flops(nil, w.Cols))()
	return i.Input.(InputAdd).MulAdd(c, w)
}
func (i timedInput) MulT(c, g *matrix.Dense) error {
	defer i.t.op(i.class, i.bytes(nil)+sizes(c, g), i.flops(nil, g.Cols))()
	return i.Input.MulT(c, g)
}
func (i timedInput) MulRows(c, w *matrix.Dense, rows []int32) error {
	defer i.t.op(i.class, i.bytes(rows)+rowBytes(len(rows), c.Cols)+sizes(w), i.flops(rows, w.Cols))()
	return i.Input.(RowInput).MulRows(c, w, rows)
}
func (i timedInput) MulRowsBiasReLU(c, w *matrix.Dense, bias []float32, rows []int32, then matrix.Mask, dropped *matrix.Dense) error {
	out := rowBytes(len(rows), c.Cols)
	if then.P > 0 {
		out *= 2
	}
	defer i.t.op(i.class, i.bytes(rows)+out+sizes(w), i.flops(rows, w.Cols))()
	return i.Input.(RowInput).MulRowsBiasReLU(c, w, bias, rows, then, dropped)
}
func (i timedInput) MulTRows(c, g *matrix.Dense, rows []int32) error {
	defer i.t.op(i.class, i.bytes(rows)+rowBytes(len(rows), g.Cols)+sizes(c), i.flops(rows, g.Cols))()
	return i.Input.(RowInput).MulTRows(c, g, rows)
}

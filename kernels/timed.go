package kernels

import (
	"time"

	"sancus/kernels/matrix"
)

// Timed wraps a backend and adds the wall time of each call to the class
// it belongs to: what an epoch's time breakdown is made of. It times the
// call as issued, so a device backend's figures count only the launches
// unless it synchronizes; the CPU's are the work itself.
type Timed struct {
	Backend
	Times map[string]time.Duration // by TimedClasses
}

// TimedClasses are the classes Timed adds time to.
var TimedClasses = []string{"gemm", "spmm", "dropout", "loss", "elementwise", "attention"}

// NewTimed wraps be.
func NewTimed(be Backend) *Timed { return &Timed{Backend: be, Times: map[string]time.Duration{}} }

func (t *Timed) add(class string, start time.Time) { t.Times[class] += time.Since(start) }

func (t *Timed) SpMM(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, acc bool) error {
	defer t.add("spmm", time.Now())
	return t.Backend.SpMM(c, a, b, acc)
}
func (t *Timed) GEMM(c, a, b *matrix.Dense, acc bool) error {
	defer t.add("gemm", time.Now())
	return t.Backend.GEMM(c, a, b, acc)
}
func (t *Timed) GEMMTN(c, a, b *matrix.Dense) error {
	defer t.add("gemm", time.Now())
	return t.Backend.GEMMTN(c, a, b)
}
func (t *Timed) GEMMNT(c, a, b *matrix.Dense) error {
	defer t.add("gemm", time.Now())
	return t.Backend.GEMMNT(c, a, b)
}

// The row operations time the wrapped backend's (RowsOf finds them only
// where it has them).
func (t *Timed) SpMMRows(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, rows []int32, acc bool) error {
	defer t.add("spmm", time.Now())
	return t.Backend.(RowOps).SpMMRows(c, a, b, rows, acc)
}
func (t *Timed) GEMMRows(c, a, b *matrix.Dense, rows []int32) error {
	defer t.add("gemm", time.Now())
	return t.Backend.(RowOps).GEMMRows(c, a, b, rows)
}
func (t *Timed) GEMMNTRows(c, a, b *matrix.Dense, rows []int32) error {
	defer t.add("gemm", time.Now())
	return t.Backend.(RowOps).GEMMNTRows(c, a, b, rows)
}
func (t *Timed) GEMMTNRows(c, a, b *matrix.Dense, rows []int32) error {
	defer t.add("gemm", time.Now())
	return t.Backend.(RowOps).GEMMTNRows(c, a, b, rows)
}
func (t *Timed) AddBiasReLURows(z *matrix.Dense, bias []float32, relu bool, rows []int32) error {
	defer t.add("elementwise", time.Now())
	return t.Backend.(RowOps).AddBiasReLURows(z, bias, relu, rows)
}
func (t *Timed) ColumnSumsRows(out []float32, g *matrix.Dense, rows []int32) error {
	defer t.add("elementwise", time.Now())
	return t.Backend.(RowOps).ColumnSumsRows(out, g, rows)
}
func (t *Timed) LossGradRows(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64 {
	defer t.add("loss", time.Now())
	return t.Backend.(RowOps).LossGradRows(logits, labels, rows, norm, grad)
}
func (t *Timed) DropoutRows(m matrix.Mask, dst, src *matrix.Dense, rows []int32) error {
	defer t.add("dropout", time.Now())
	return t.Backend.(RowOps).DropoutRows(m, dst, src, rows)
}
func (t *Timed) ZeroOtherRows(m *matrix.Dense, rows []int32) error {
	defer t.add("elementwise", time.Now())
	return t.Backend.(RowOps).ZeroOtherRows(m, rows)
}
func (t *Timed) Dropout(m matrix.Mask, dst, src *matrix.Dense) {
	defer t.add("dropout", time.Now())
	t.Backend.Dropout(m, dst, src)
}
func (t *Timed) LossGrad(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64 {
	defer t.add("loss", time.Now())
	return t.Backend.LossGrad(logits, labels, rows, norm, grad)
}
func (t *Timed) AddBiasReLU(z *matrix.Dense, bias []float32, relu bool) {
	defer t.add("elementwise", time.Now())
	t.Backend.AddBiasReLU(z, bias, relu)
}
func (t *Timed) ReLUBackward(g, h *matrix.Dense) {
	defer t.add("elementwise", time.Now())
	t.Backend.ReLUBackward(g, h)
}
func (t *Timed) Add(a, b *matrix.Dense) {
	defer t.add("elementwise", time.Now())
	t.Backend.(ElementOps).Add(a, b)
}
func (t *Timed) ScaleRows(dst, src *matrix.Dense, s []float32) {
	defer t.add("elementwise", time.Now())
	t.Backend.(ElementOps).ScaleRows(dst, src, s)
}
func (t *Timed) ELU(z *matrix.Dense) {
	defer t.add("elementwise", time.Now())
	t.Backend.(ELUOps).ELU(z)
}
func (t *Timed) ELUBackward(g, h *matrix.Dense) {
	defer t.add("elementwise", time.Now())
	t.Backend.(ELUOps).ELUBackward(g, h)
}
func (t *Timed) GATPayload(pay, el, u, al, ar *matrix.Dense, h int) {
	defer t.add("attention", time.Now())
	t.Backend.(Attention).GATPayload(pay, el, u, al, ar, h)
}
func (t *Timed) GATStart(st GATState) {
	defer t.add("attention", time.Now())
	t.Backend.(Attention).GATStart(st)
}
func (t *Timed) GATAttend(b *GATBlock, src *matrix.Dense, st GATState) {
	defer t.add("attention", time.Now())
	t.Backend.(Attention).GATAttend(b, src, st)
}
func (t *Timed) GATFinish(z *matrix.Dense, st GATState, h int, concat bool) {
	defer t.add("attention", time.Now())
	t.Backend.(Attention).GATFinish(z, st, h, concat)
}
func (t *Timed) GATGradRows(gpay, dEl, dEr, g *matrix.Dense, st GATState, h int, concat bool) {
	defer t.add("attention", time.Now())
	t.Backend.(Attention).GATGradRows(gpay, dEl, dEr, g, st, h, concat)
}
func (t *Timed) GATNeighbour(b *GATBlock, src, own, dU, dEr *matrix.Dense) {
	defer t.add("attention", time.Now())
	t.Backend.(Attention).GATNeighbour(b, src, own, dU, dEr)
}
func (t *Timed) GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar *matrix.Dense, h int) {
	defer t.add("attention", time.Now())
	t.Backend.(Attention).GATScoreGrads(dU, dAl, dAr, dEl, dEr, u, own, al, ar, h)
}
func (t *Timed) DropoutReLUBackward(m matrix.Mask, g, h *matrix.Dense, sums []float32) {
	defer t.add("dropout", time.Now())
	t.Backend.(Fused).DropoutReLUBackward(m, g, h, sums)
}
func (t *Timed) ReLUDroppedBackward(g, dropped *matrix.Dense, scale float32, sums []float32) error {
	defer t.add("dropout", time.Now())
	return t.Backend.(Fused).ReLUDroppedBackward(g, dropped, scale, sums)
}
func (t *Timed) ColumnSums(out []float32, g *matrix.Dense) {
	defer t.add("elementwise", time.Now())
	t.Backend.ColumnSums(out, g)
}
func (t *Timed) Copy(dst, src *matrix.Dense) {
	defer t.add("elementwise", time.Now())
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
	return timedInput{in, t, class}, nil
}

type timedInput struct {
	Input
	t     *Timed
	class string
}

func (i timedInput) Mul(c, w *matrix.Dense) error {
	defer i.t.add(i.class, time.Now())
	return i.Input.Mul(c, w)
}
func (i timedInput) MulT(c, g *matrix.Dense) error {
	defer i.t.add(i.class, time.Now())
	return i.Input.MulT(c, g)
}
func (i timedInput) MulRows(c, w *matrix.Dense, rows []int32) error {
	defer i.t.add(i.class, time.Now())
	return i.Input.(RowInput).MulRows(c, w, rows)
}
func (i timedInput) MulRowsBiasReLU(c, w *matrix.Dense, bias []float32, rows []int32, then matrix.Mask, dropped *matrix.Dense) error {
	defer i.t.add(i.class, time.Now())
	return i.Input.(RowInput).MulRowsBiasReLU(c, w, bias, rows, then, dropped)
}
func (i timedInput) MulTRows(c, g *matrix.Dense, rows []int32) error {
	defer i.t.add(i.class, time.Now())
	return i.Input.(RowInput).MulTRows(c, g, rows)
}

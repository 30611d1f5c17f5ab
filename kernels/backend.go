package kernels

import (
	"fmt"
	"sancus/kernels/matrix"
)

// Backend runs the engine's matrix operations where its matrices live. The
// engine makes every matrix it computes into with NewDense, so a device
// backend can keep values in device memory and fill Data only on Download;
// matrices the engine builds on the host (weights, loss gradients) are
// read from Data.
//
// CPU is the default. Device backends register themselves (kernels/cuda, in
// the cuda build) and are opened by name; their errors are sticky, as a
// device's are, and are reported by Err, which the engine checks once per
// pass instead of after every operation.
type Backend interface {
	Name() string
	NewDense(rows, cols int) *matrix.Dense
	// Mirror makes a matrix whose host side is data (a cache block the
	// transport reads and writes); Upload and Download move it.
	Mirror(data []float32, rows, cols int) *matrix.Dense
	Upload(d *matrix.Dense)   // Data → device
	Download(d *matrix.Dense) // device → Data
	Copy(dst, src *matrix.Dense)
	Zero(d *matrix.Dense)

	SpMM(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, accumulate bool) error
	GEMM(c, a, b *matrix.Dense, accumulate bool) error
	GEMMTN(c, a, b *matrix.Dense) error
	GEMMNT(c, a, b *matrix.Dense) error
	AddBiasReLU(z *matrix.Dense, bias []float32, relu bool)
	ReLUBackward(g, h *matrix.Dense)
	Dropout(m matrix.Mask, dst, src *matrix.Dense)
	ColumnSums(out []float32, g *matrix.Dense)
	Norm(d *matrix.Dense) float64
	// LossGrad is SoftmaxCE with logits and grad where the backend keeps
	// them: the summed loss over rows comes back, the gradient stays.
	LossGrad(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64
	Scale(d *matrix.Dense, s float32)
	// Input makes the layer-1 operand (X or ÂX) usable on this backend.
	Input(o *Operand) (Input, error)

	Err() error
	Close() error
}

// Input is the first layer's operand: dropout, O·W and Oᵀ·G.
type Input interface {
	SetDropout(m matrix.Mask)
	Mul(c, w *matrix.Dense) error
	MulT(c, g *matrix.Dense) error
}

// RowOps is what a backend may add: the operations of a layer whose
// consumer reads only some rows (the loss reads the training rows), at a
// list of them. Â·H, A·B and A·Bᵀ write the listed rows of C and leave the
// rest; Aᵀ·B and column sums sum over the listed rows; the bias, the loss
// gradient and dropout are written at the listed rows alone. The loss
// gradient may be written over the logits themselves (grad == logits): each
// listed row is read whole before its gradient is written. An empty or
// nil list is no row to every operation (and every row is other to
// ZeroOtherRows). Find it with RowsOf; a backend without it computes
// every row.
type RowOps interface {
	SpMMRows(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, rows []int32, accumulate bool) error
	GEMMRows(c, a, b *matrix.Dense, rows []int32) error
	GEMMNTRows(c, a, b *matrix.Dense, rows []int32) error
	GEMMTNRows(c, a, b *matrix.Dense, rows []int32) error
	AddBiasReLURows(z *matrix.Dense, bias []float32, relu bool, rows []int32) error
	ColumnSumsRows(out []float32, g *matrix.Dense, rows []int32) error
	LossGradRows(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64
	DropoutRows(m matrix.Mask, dst, src *matrix.Dense, rows []int32) error
	ZeroOtherRows(m *matrix.Dense, rows []int32) error // rows ascending
}

// Fused is what a backend may add: dropout's backward and ReLU's in one
// pass over ∂H, leaving what the two calls would, and with sums the bias
// gradient ColumnSums would form from the result; or the same from the
// forward's dropped output M(h) (RowInput.MulRowsBiasReLU's dropped copy),
// which needs no draw. Find it with FusedOf; a backend without it makes
// the calls.
type Fused interface {
	DropoutReLUBackward(m matrix.Mask, g, h *matrix.Dense, sums []float32)
	ReLUDroppedBackward(g, dropped *matrix.Dense, scale float32, sums []float32) error
}

// ElementOps is what a backend may add: a sum and a row scaling where the
// matrices live (GraphSAGE's root path, and D⁻¹ on its gradients). Find
// it with ElementOpsOf; without it, the engine computes on host copies.
type ElementOps interface {
	Add(a, b *matrix.Dense)                        // a += b
	ScaleRows(dst, src *matrix.Dense, s []float32) // dst row r = src row r · s[r]
}

// ElementOpsOf returns be's element operations, if it has them (through
// Timed too).
func ElementOpsOf(be Backend) (ElementOps, bool) { return optional[ElementOps](be) }

// ELUOps is what a backend may add: GAT's activation and its backward
// where the matrices live. Find it with ELUOf; without it, the engine
// applies ELU and ELUBackward to host copies.
type ELUOps interface {
	ELU(z *matrix.Dense)
	ELUBackward(g, h *matrix.Dense)
}

// ELUOf returns be's ELU, if it has it (through Timed too).
func ELUOf(be Backend) (ELUOps, bool) { return optional[ELUOps](be) }

// RowInput is what an Input may add: its products at a list of rows, as
// RowOps' (O·W at the listed rows, Oᵀ·G summed over them), with the
// operand's dropout. The CPU's dense operands have it; find it with
// InputRowsOf.
type RowInput interface {
	MulRows(c, w *matrix.Dense, rows []int32) error
	MulTRows(c, g *matrix.Dense, rows []int32) error
	// MulRowsBiasReLU is MulRows, then AddBiasReLURows at the same rows,
	// in one pass; with then.P > 0 it also writes those rows dropped by
	// then into dropped (GEMMRowsDropBiasReLUThen).
	MulRowsBiasReLU(c, w *matrix.Dense, bias []float32, rows []int32, then matrix.Mask, dropped *matrix.Dense) error
}

// InputRowsOf returns in's row products, if it has them (timed too).
func InputRowsOf(in Input) (RowInput, bool) { return optionalInput[RowInput](in) }

// InputAdd is what an Input may add: O·W summed into C, so that a layer
// whose output has a second term (GraphSAGE's root path) makes no pass to
// add it. The CPU's operands have it; find it with InputAddOf.
type InputAdd interface {
	MulAdd(c, w *matrix.Dense) error // c += O·w
}

// InputAddOf returns in's summing product, if it has it (timed too).
func InputAddOf(in Input) (InputAdd, bool) { return optionalInput[InputAdd](in) }

// optionalInput is optional's for an Input: timedInput implements every
// optional interface, but only forwards what it wraps.
func optionalInput[T any](in Input) (T, bool) {
	var none T
	inner := in
	if t, ok := in.(timedInput); ok {
		inner = t.Input
	}
	if _, ok := inner.(T); !ok {
		return none, false
	}
	got, ok := in.(T)
	return got, ok
}

// Occupier is what a backend may add: a product at a block's occupied
// rows through their own pointers (SpMMOccupied). Find it with OccupiedOf;
// a backend without it takes the rows' list alone (RowOps.SpMMRows).
type Occupier interface {
	SpMMOccupied(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, o OccupiedRows, accumulate bool) error
}

// OccupiedOf returns be's Occupier, if it has one.
func OccupiedOf(be Backend) (Occupier, bool) { return optional[Occupier](be) }

// RowsOf returns be's row operations, if it has them (through Timed too).
func RowsOf(be Backend) (RowOps, bool) { return optional[RowOps](be) }

// FusedOf returns be's fused operations, if it has them (through Timed too).
func FusedOf(be Backend) (Fused, bool) { return optional[Fused](be) }

// optional returns be as T where the backend itself implements T: Timed
// implements every optional interface, but only forwards what it wraps.
func optional[T any](be Backend) (T, bool) {
	var none T
	inner := be
	if t, ok := be.(*Timed); ok {
		inner = t.Backend
	}
	if _, ok := inner.(T); !ok {
		return none, false
	}
	got, ok := be.(T)
	return got, ok
}

// Opener makes a backend for the device of a rank (its local rank picks
// the device).
type Opener func(localRank int) (Backend, error)

// openers are the devices Open can open: the CPU always, others once a
// binary's setup names them with Use.
var openers = map[Device]Opener{DeviceCPU: func(int) (Backend, error) { return CPU{}, nil }}

// Use makes Open(d) call open. A binary built with CUDA calls
// Use(DeviceCUDA, cuda.Opener) as it starts, as gonum's blas64.Use names a
// BLAS: which backend runs is the caller's explicit choice, not a side
// effect of what the binary happens to link.
func Use(d Device, open Opener) { openers[d] = open }

// Open returns the backend of a device.
func Open(d Device, localRank int) (Backend, error) {
	if open, ok := openers[d]; ok {
		return open(localRank)
	}
	if d == DeviceCUDA {
		return nil, fmt.Errorf("device cuda: this binary was built without CUDA (build it with `make cuda` on a host with the CUDA toolkit)")
	}
	return nil, fmt.Errorf("unknown device %v (cpu, or cuda in a CUDA build)", d)
}

// CPU is the host backend: the kernels of this package, in place on Data.
type CPU struct{}

func (CPU) Name() string                          { return "cpu" }
func (CPU) NewDense(rows, cols int) *matrix.Dense { return matrix.NewDense(rows, cols) }
func (CPU) Mirror(data []float32, rows, cols int) *matrix.Dense {
	return &matrix.Dense{Rows: rows, Cols: cols, Data: data}
}
func (CPU) Upload(*matrix.Dense)        {}
func (CPU) Download(*matrix.Dense)      {}
func (CPU) Copy(dst, src *matrix.Dense) { Copy(dst.Data, src.Data) }
func (CPU) Zero(d *matrix.Dense)        { Zero(d.Data) }
func (CPU) SpMM(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, acc bool) error {
	return SpMM(c, a, b, acc)
}
func (CPU) GEMM(c, a, b *matrix.Dense, acc bool) error { return GEMM(c, a, b, acc) }
func (CPU) GEMMTN(c, a, b *matrix.Dense) error         { return GEMMTN(c, a, b) }
func (CPU) GEMMNT(c, a, b *matrix.Dense) error         { return GEMMNT(c, a, b) }
func (CPU) SpMMRows(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, rows []int32, acc bool) error {
	return SpMMRows(c, a, b, rows, acc)
}
func (CPU) SpMMOccupied(c *matrix.Dense, a *matrix.CSR, b *matrix.Dense, o OccupiedRows, acc bool) error {
	return SpMMOccupied(c, a, b, o, acc)
}
func (CPU) GEMMRows(c, a, b *matrix.Dense, rows []int32) error     { return GEMMRows(c, a, b, rows) }
func (CPU) GEMMNTRows(c, a, b *matrix.Dense, rows []int32) error   { return GEMMNTRows(c, a, b, rows) }
func (CPU) GEMMTNRows(c, a, b *matrix.Dense, rows []int32) error   { return GEMMTNRows(c, a, b, rows) }
func (CPU) AddBiasReLU(z *matrix.Dense, bias []float32, relu bool) { AddBiasReLU(z, bias, relu) }
func (CPU) AddBiasReLURows(z *matrix.Dense, bias []float32, relu bool, rows []int32) error {
	return AddBiasReLURows(z, bias, relu, rows)
}
func (CPU) ColumnSumsRows(out []float32, g *matrix.Dense, rows []int32) error {
	return ColumnSumsRows(out, g, rows)
}
func (CPU) LossGradRows(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64 {
	return SoftmaxCERows(logits, labels, rows, norm, grad)
}
func (CPU) DropoutRows(m matrix.Mask, dst, src *matrix.Dense, rows []int32) error {
	return DropoutRows(m, dst, src, rows)
}
func (CPU) ZeroOtherRows(m *matrix.Dense, rows []int32) error { return ZeroOtherRows(m, rows) }
func (CPU) ReLUBackward(g, h *matrix.Dense)                   { ReLUBackward(g, h) }
func (CPU) ELU(z *matrix.Dense)                               { ELU(z) }
func (CPU) Add(a, b *matrix.Dense)                            { Add(a, b) }
func (CPU) ScaleRows(dst, src *matrix.Dense, s []float32)     { ScaleRows(dst, src, s) }
func (CPU) ELUBackward(g, h *matrix.Dense)                    { ELUBackward(g, h) }
func (CPU) DropoutReLUBackward(m matrix.Mask, g, h *matrix.Dense, sums []float32) {
	DropoutReLUBackward(m, g, h, sums)
}
func (CPU) ReLUDroppedBackward(g, dropped *matrix.Dense, scale float32, sums []float32) error {
	return ReLUDroppedBackward(g, dropped, scale, sums)
}
func (CPU) Dropout(m matrix.Mask, dst, src *matrix.Dense) { Dropout(m, dst, src) }
func (CPU) ColumnSums(out []float32, g *matrix.Dense)     { ColumnSums(out, g) }
func (CPU) LossGrad(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64 {
	return SoftmaxCE(logits, labels, rows, norm, grad)
}
func (CPU) Norm(d *matrix.Dense) float64     { return FrobNorm(d.Data) }
func (CPU) Scale(d *matrix.Dense, s float32) { Scale(d.Data, s) }
func (CPU) Input(o *Operand) (Input, error) {
	if o.IsSparse() {
		return o, nil
	}
	return denseInput{o}, nil
}
func (CPU) Err() error   { return nil }
func (CPU) Close() error { return nil }

// Sync, Triad and Device serve the kernel benchmark.
func (CPU) Sync() error                            { return nil }
func (CPU) Triad(a, b, c *matrix.Dense, s float32) { Triad(a.Data, b.Data, c.Data, s) }
func (CPU) Device() string                         { return fmt.Sprintf("cpu (%s, %d threads)", SIMD(), threads) }

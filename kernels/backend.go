package kernels

import "fmt"

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
	NewDense(rows, cols int) *Dense
	// Mirror makes a matrix whose host side is data (a cache block the
	// transport reads and writes); Upload and Download move it.
	Mirror(data []float32, rows, cols int) *Dense
	Upload(d *Dense)   // Data → device
	Download(d *Dense) // device → Data
	Copy(dst, src *Dense)
	Zero(d *Dense)

	SpMM(c *Dense, a *CSR, b *Dense, accumulate bool) error
	GEMM(c, a, b *Dense, accumulate bool) error
	GEMMTN(c, a, b *Dense) error
	GEMMNT(c, a, b *Dense) error
	AddBiasReLU(z *Dense, bias []float32, relu bool)
	ReLUBackward(g, h *Dense)
	Dropout(m Mask, dst, src *Dense)
	ColumnSums(out []float32, g *Dense)
	Norm(d *Dense) float64
	// LossGrad is SoftmaxCE with logits and grad where the backend keeps
	// them: the summed loss over rows comes back, the gradient stays.
	LossGrad(logits *Dense, labels, rows []int32, norm float64, grad *Dense) float64
	Scale(d *Dense, s float32)
	// Input makes the layer-1 operand (X or ÂX) usable on this backend.
	Input(o *Operand) (Input, error)

	Err() error
	Close() error
}

// Input is the first layer's operand: dropout, O·W and Oᵀ·G.
type Input interface {
	SetDropout(m Mask)
	Mul(c, w *Dense) error
	MulT(c, g *Dense) error
}

// Opener makes a backend for the device of a rank (its local rank picks
// the device).
type Opener func(localRank int) (Backend, error)

// registry holds the openers; registration happens in init functions.
var registry = map[string]Opener{"cpu": func(int) (Backend, error) { return CPU{}, nil }}

// Register makes a backend available to Open under name; call it from init.
func Register(name string, open Opener) { registry[name] = open }

// Open returns the named backend ("" is the CPU).
func Open(name string, localRank int) (Backend, error) {
	if name == "" {
		name = "cpu"
	}
	if open, ok := registry[name]; ok {
		return open(localRank)
	}
	if name == "cuda" {
		return nil, fmt.Errorf("device cuda: this binary was built without CUDA (build it with `make cuda` on a host with the CUDA toolkit)")
	}
	return nil, fmt.Errorf("unknown device %q (cpu, or cuda in a CUDA build)", name)
}

// CPU is the host backend: the kernels of this package, in place on Data.
type CPU struct{}

func (CPU) Name() string                   { return "cpu" }
func (CPU) NewDense(rows, cols int) *Dense { return NewDense(rows, cols) }
func (CPU) Mirror(data []float32, rows, cols int) *Dense {
	return &Dense{Rows: rows, Cols: cols, Data: data}
}
func (CPU) Upload(*Dense)        {}
func (CPU) Download(*Dense)      {}
func (CPU) Copy(dst, src *Dense) { copy(dst.Data, src.Data) }
func (CPU) Zero(d *Dense)        { d.Zero() }
func (CPU) SpMM(c *Dense, a *CSR, b *Dense, acc bool) error {
	return SpMM(c, a, b, acc)
}
func (CPU) GEMM(c, a, b *Dense, acc bool) error             { return GEMM(c, a, b, acc) }
func (CPU) GEMMTN(c, a, b *Dense) error                     { return GEMMTN(c, a, b) }
func (CPU) GEMMNT(c, a, b *Dense) error                     { return GEMMNT(c, a, b) }
func (CPU) AddBiasReLU(z *Dense, bias []float32, relu bool) { AddBiasReLU(z, bias, relu) }
func (CPU) ReLUBackward(g, h *Dense)                        { ReLUBackward(g, h) }
func (CPU) Dropout(m Mask, dst, src *Dense)                 { m.ApplyDense(dst, src) }
func (CPU) ColumnSums(out []float32, g *Dense)              { ColumnSums(out, g) }
func (CPU) LossGrad(logits *Dense, labels, rows []int32, norm float64, grad *Dense) float64 {
	return SoftmaxCE(logits, labels, rows, norm, grad)
}
func (CPU) Norm(d *Dense) float64           { return FrobNorm(d.Data) }
func (CPU) Scale(d *Dense, s float32)       { Scale(d.Data, s) }
func (CPU) Input(o *Operand) (Input, error) { return o, nil }
func (CPU) Err() error                      { return nil }
func (CPU) Close() error                    { return nil }

// Sync, Triad and Device serve the kernel benchmark.
func (CPU) Sync() error                     { return nil }
func (CPU) Triad(a, b, c *Dense, s float32) { Triad(a.Data, b.Data, c.Data, s) }
func (CPU) Device() string                  { return fmt.Sprintf("cpu (%s, %d threads)", SIMD(), threads) }

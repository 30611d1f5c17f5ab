package train

import (
	"sancus/kernels"
	"sancus/kernels/matrix"
)

// An activation is what a layer applies after its bias: ReLU, or ELU for a
// GAT (as Veličković et al.). It is chosen once per layer, from the model
// family and what the backend offers.
type activation interface {
	// apply adds the bias to h and, for a hidden layer, activates it in
	// place.
	apply(h *matrix.Dense, bias []float32, hidden bool)
	// backward multiplies g by the derivative, read off the output h.
	backward(g, h *matrix.Dense)
}

type relu struct{ be kernels.Backend }

func (a relu) apply(h *matrix.Dense, bias []float32, hidden bool) { a.be.AddBiasReLU(h, bias, hidden) }
func (a relu) backward(g, h *matrix.Dense)                        { a.be.ReLUBackward(g, h) }

type elu struct {
	be  kernels.Backend
	ops kernels.ELUOps
}

func (a elu) apply(h *matrix.Dense, bias []float32, hidden bool) {
	a.be.AddBiasReLU(h, bias, false)
	if hidden {
		a.ops.ELU(h)
	}
}
func (a elu) backward(g, h *matrix.Dense) { a.ops.ELUBackward(g, h) }

// hostOps are the optional backend operations on host copies, for a
// backend without them.
type hostOps struct{ be kernels.Backend }

func (h hostOps) ELU(z *matrix.Dense) {
	h.be.Download(z)
	kernels.ELU(z)
	h.be.Upload(z)
}

func (h hostOps) ELUBackward(g, y *matrix.Dense) {
	h.be.Download(g)
	h.be.Download(y)
	kernels.ELUBackward(g, y)
	h.be.Upload(g)
}

func (h hostOps) Add(a, b *matrix.Dense) {
	h.be.Download(a)
	h.be.Download(b)
	kernels.Add(a, b)
	h.be.Upload(a)
}

func (h hostOps) ScaleRows(dst, src *matrix.Dense, s []float32) {
	h.be.Download(src)
	kernels.ScaleRows(dst, src, s)
	h.be.Upload(dst)
}

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

func (e *Engine) activation() activation {
	if !e.cfg.Model.Arch.ELU() {
		return relu{e.be}
	}
	if ops, ok := kernels.ELUOf(e.be); ok {
		return elu{e.be, ops}
	}
	return elu{e.be, hostELU{e}}
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

// hostELU is ELU on host copies, for a backend without its own.
type hostELU struct{ e *Engine }

func (h hostELU) ELU(z *matrix.Dense) {
	h.e.host(z)
	kernels.ELU(z)
	h.e.be.Upload(z)
}

func (h hostELU) ELUBackward(g, y *matrix.Dense) {
	h.e.host(g)
	h.e.host(y)
	kernels.ELUBackward(g, y)
	h.e.be.Upload(g)
}

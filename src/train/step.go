package train

import (
	"fmt"
	"math"
	"time"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
)

// forward runs all layers and returns the logits of this rank's rows. In
// training the staleness policy may skip broadcasts; evaluation always uses
// fresh blocks and leaves the training caches alone.
func (e *Engine) forward(epoch int, train bool) (*matrix.Dense, error) {
	return e.forwardReporting(epoch, train, nil)
}

// forwardReporting is forward, telling layerDone (if set) as each layer
// is computed.
func (e *Engine) forwardReporting(epoch int, train bool, layerDone func(l, layers int)) (*matrix.Dense, error) {
	p := pass{epoch: epoch, train: train, shadow: train && e.drift.on}
	var a act
	for l, L := range e.layers {
		if l > 0 && layerDone != nil {
			layerDone(l, len(e.layers))
		}
		in := a
		var err error
		if a, err = L.forward(e, p, a); err != nil {
			return nil, fmt.Errorf("forward layer %d: %w", l+1, err)
		}
		hidden := l < len(e.layers)-1
		switch ro := e.rowsAt(l); {
		case a.activated: // the layer added its bias and ReLU as it wrote its rows
		case train && ro != nil: // the logits are read at the training rows alone
			err = ro.AddBiasReLURows(a.h, e.m.B[l], false, e.out.rows)
		default:
			e.layers[l].base().act.apply(a.h, e.m.B[l], hidden)
		}
		if err != nil {
			return nil, fmt.Errorf("forward layer %d: %w", l+1, err)
		}
		if a.clean != nil {
			e.layers[l].base().act.apply(a.clean, e.m.B[l], hidden)
		}
		if e.hasResidual(l) { // H_{l+1} = act(Z_l) + H_l; z keeps act(Z_l) for the backward pass
			out := e.skips.out[l]
			e.be.Copy(out, a.h)
			e.addInto(out, in.h)
			a = act{h: out} // the noise-free shadow stops here
		}
	}
	if err := e.be.Err(); err != nil {
		return nil, fmt.Errorf("forward on %s: %w", e.be.Name(), err)
	}
	// The loss at the training rows alone (run.go) must find the others
	// zero: they are, unless a pass that writes them all ran, as
	// evaluation does.
	e.out.all = e.out.all || !train
	return a.h, nil
}

// dropInput drops a layer's input h into dst, the layer's own matrix, with
// this pass's mask; in a training pass it records dst as the layer's
// dropped input (conv.droppedIn), which dropout's and ReLU's backward then
// read rather than draw the mask again.
func (e *Engine) dropInput(c *conv, p pass, mask matrix.Mask, dst, h *matrix.Dense) {
	e.be.Dropout(mask, dst, h)
	c.droppedIn = passCopy{}
	if p.train && mask.P > 0 {
		c.droppedIn.hold(dst, p.epoch)
	}
}

// droppedOutput is layer l-1's output as layer l dropped it in epoch's
// training pass, where a copy is at hand (nil: none; the mask is drawn
// again): made by layer l-1 as it wrote its rows (nextDrops), or by layer
// l into its own input (dropInput). Each copy serves one backward.
func (e *Engine) droppedOutput(l, epoch int) *matrix.Dense {
	if d := e.layers[l-1].base().dropped.take(epoch); d != nil {
		return d
	}
	return e.layers[l].base().droppedIn.take(epoch)
}

// hasResidual reports whether layer l adds its input to its output: a hidden
// layer between hidden layers, with --residual (their widths are equal).
func (e *Engine) hasResidual(l int) bool {
	return e.plan.Model.Residual && l > 0 && l < e.plan.Model.Layers-1 && e.m.Dims[l] == e.m.Dims[l+1]
}

// backward propagates g = ∂L/∂logits and leaves every weight and bias
// gradient of this rank's rows in the layers (before the allreduce).
func (e *Engine) backward(epoch int, g *matrix.Dense) error {
	skip := false   // e.skips.grad holds ∂L/∂H_{l+1}, which a residual carries to H_l
	summed := false // the fused pass below has formed layer l's bias gradient
	for l := len(e.layers) - 1; l >= 0; l-- {
		L := e.layers[l]
		if ro := e.rowsAt(l); ro != nil { // g is zero off the training rows
			if err := ro.ColumnSumsRows(L.base().db, g, e.out.rows); err != nil {
				return fmt.Errorf("backward layer %d: %w", l+1, err)
			}
		} else if !summed {
			e.be.ColumnSums(L.base().db, g)
		}
		summed = false
		dIn, err := L.backward(e, epoch, g)
		if err != nil {
			return fmt.Errorf("backward layer %d: %w", l+1, err)
		}
		if l > 0 {
			mask := e.mask(epoch, l, true) // dropout's backward is the same mask
			if f, ok := kernels.FusedOf(e.be); ok && !skip && !e.hasResidual(l-1) && !e.plan.Model.Arch.Attends() {
				// One pass for the two calls below and the bias gradient
				// of layer l-1 (formed where rowsAt(l-1) is nil: l-1 is
				// not the last layer).
				below := e.layers[l-1].base()
				if d := e.droppedOutput(l, epoch); d != nil { // M(h) is at hand
					if err := f.ReLUDroppedBackward(dIn, d, mask.KeepScale(), below.db); err != nil {
						return fmt.Errorf("backward layer %d: %w", l, err)
					}
				} else {
					f.DropoutReLUBackward(mask, dIn, below.z, below.db)
				}
				g, summed = dIn, true
				continue
			}
			e.be.Dropout(mask, dIn, dIn)
			if skip {
				e.addInto(dIn, e.skips.grad)
				skip = false
			}
			if e.hasResidual(l - 1) {
				e.be.Copy(e.skips.grad, dIn)
				skip = true
			}
			e.layers[l-1].base().act.backward(dIn, e.layers[l-1].base().z)
			g = dIn
		}
	}
	if err := e.be.Err(); err != nil {
		return fmt.Errorf("backward on %s: %w", e.be.Name(), err)
	}
	return nil
}

// step sums gradients over ranks, adds weight decay and applies Adam.
// Every rank ends with bit-identical parameters. It returns what went
// non-finite ("" when all is well: the summed gradients and the updated
// weights are the same on every rank, so every rank agrees without
// communicating).
func (e *Engine) step() (nonFinite string, err error) {
	if err := e.reduceGradients(); err != nil {
		return "", err
	}
	e.decay(e.ar.grads)
	if what := e.nonFinite("gradient", func(off int, t []float32) []float32 { return e.ar.grads[off : off+len(t)] }); what != "" {
		return what, nil // keep the last finite weights
	}
	e.opt.Update(e.m.Flat(), e.ar.grads)
	return e.nonFinite("weights after the update", func(_ int, t []float32) []float32 { return t }), nil
}

// decay adds weight decay to the summed gradients g (packed in Flat
// order): the first layer's weights (and root weights); a GAT's every
// parameter.
func (e *Engine) decay(g []float32) {
	wd := float32(e.plan.Optim.WeightDecay)
	if wd <= 0 {
		return
	}
	decayed, all := 1, e.plan.Model.Arch.DecaysAll()
	if all {
		decayed = e.m.Layers()
	}
	off := 0
	for l := range decayed {
		for k, t := range e.m.Tensors(l) {
			if k != 1 || all {
				for i, v := range t {
					g[off+i] += wd * v
				}
			}
			off += len(t)
		}
	}
}

// nonFinite names the first parameter tensor holding a NaN or Inf, in Flat
// order; view gives the values to check for the tensor t that starts at
// off in a packed vector (its gradient, or t itself).
func (e *Engine) nonFinite(what string, view func(off int, t []float32) []float32) string {
	off := 0
	for l := range e.layers {
		for k, t := range e.m.Tensors(l) {
			for _, v := range view(off, t) {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fmt.Sprintf("non-finite %s of layer %d %s", what, l+1, e.m.TensorNames()[k])
				}
			}
			off += len(t)
		}
	}
	return ""
}

// reduceGradients packs every layer's ∇W and ∇b into one buffer and sums it
// over ranks with one allreduce.
func (e *Engine) reduceGradients() error {
	off := 0
	for _, L := range e.layers {
		off += copy(e.ar.grads[off:], e.host(L.base().dW))
		off += copy(e.ar.grads[off:], L.base().db)
		for _, t := range L.base().extraGrads {
			off += copy(e.ar.grads[off:], e.host(t))
		}
	}
	start := time.Now()
	if err := e.allreduce(e.ar.grads); err != nil {
		return fmt.Errorf("gradient allreduce: %w", err)
	}
	e.tally.clock.comm += time.Since(start)
	e.tally.clock.wait += time.Since(start)
	return nil
}

// allreduce sums the packed gradients over ranks: in float32, or in bf16
// with error feedback — what rounding this rank's contribution drops is
// added back into its next one, so no gradient is lost for good.
func (e *Engine) allreduce(g []float32) error {
	if e.plan.Wire.Allreduce != wire.BF16 || e.P == 1 {
		return collectives.Allreduce(e.c, g)
	}
	if e.ar.residual == nil {
		e.ar.residual = make([]float32, len(g))
	}
	for i, v := range g {
		v += e.ar.residual[i]
		q := wire.FromBF16(wire.ToBF16(v))
		e.ar.residual[i], g[i] = v-q, q
	}
	return collectives.RingAllreduceBF16(e.c, g)
}

// Package minibatch trains a GCN or GraphSAGE on one rank's sampled
// mini-batch (src/sample): forward and backward over the batch's
// per-layer blocks, on the CPU kernels, with the model's replicated
// parameters. A rank computes its whole batch locally from the features
// it fetched; the caller sums the gradients over ranks and steps.
//
// Layer l computes, for its block's Dst from its Src (Dst being Src's
// prefix), Z = (A·drop(H))·W + b, GraphSAGE adding drop(H)_Dst·Root;
// hidden layers apply ReLU. Dropout falls on each layer's input, drawn
// as the engine draws it: keyed by (seed, step, layer, original node id),
// so a vertex's mask is the same whichever rank computes it.
package minibatch

import (
	"fmt"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/sample"
)

// Dropout is the dropout of a step: drop probability P, masks keyed by
// Seed and Step.
type Dropout struct {
	P    float32
	Seed uint64
	Step uint64
}

// mask is layer l's input mask over the block's sources.
func (d Dropout) mask(l int, b sample.Block) matrix.Mask {
	if d.P <= 0 {
		return matrix.Mask{}
	}
	return matrix.Mask{P: d.P, Seed: d.Seed, Stream: d.Step<<8 | uint64(l), IDs: b.SrcOrig}
}

// Step runs the forward and backward passes of m on b and returns the
// summed cross-entropy over the batch's seeds and ∂loss/∂parameters
// packed in m.Flat's order, the loss divided by norm (the global batch's
// size) before differentiating. A batch with no seeds gives 0 and zero
// gradients.
func Step(m *model.GCN, b *sample.Batch, norm float64, drop Dropout) (float64, []float32, error) {
	grads := make([]float32, m.NumParams())
	L := m.Layers()
	if len(b.Blocks) != L {
		return 0, nil, fmt.Errorf("minibatch: %d blocks for %d layers", len(b.Blocks), L)
	}
	if m.Arch() != model.ArchGCN && m.Arch() != model.ArchSAGE {
		return 0, nil, fmt.Errorf("minibatch: %v is not trained on sampled blocks (gcn or sage)", m.Arch())
	}
	seeds := len(b.Blocks[L-1].Dst)
	if seeds == 0 {
		return 0, grads, nil
	}
	sage := m.Root != nil
	in := make([]*matrix.Dense, L)  // each layer's dropped input
	agg := make([]*matrix.Dense, L) // A·in
	out := make([]*matrix.Dense, L) // each layer's output (after ReLU)
	h := b.X
	for l, blk := range b.Blocks {
		if h.Rows != blk.Adj.Cols || h.Cols != m.Dims[l] {
			return 0, nil, fmt.Errorf("minibatch: layer %d reads %d×%d, its block has %d sources of width %d", l+1, h.Rows, h.Cols, blk.Adj.Cols, m.Dims[l])
		}
		in[l] = h
		if mk := drop.mask(l, blk); mk.P > 0 {
			in[l] = matrix.NewDense(h.Rows, h.Cols)
			kernels.Dropout(mk, in[l], h)
		}
		nt := blk.Adj.Rows
		agg[l] = matrix.NewDense(nt, m.Dims[l])
		if err := kernels.SpMM(agg[l], blk.Adj, in[l], false); err != nil {
			return 0, nil, fmt.Errorf("minibatch: layer %d: %w", l+1, err)
		}
		z := matrix.NewDense(nt, m.Dims[l+1])
		if err := kernels.GEMM(z, agg[l], m.W[l], false); err != nil {
			return 0, nil, fmt.Errorf("minibatch: layer %d: %w", l+1, err)
		}
		if sage {
			if err := kernels.GEMM(z, in[l].Prefix(nt), m.Root[l], true); err != nil {
				return 0, nil, fmt.Errorf("minibatch: layer %d: %w", l+1, err)
			}
		}
		kernels.AddBiasReLU(z, m.B[l], l < L-1)
		out[l], h = z, z
	}
	rows := make([]int32, seeds)
	for i := range rows {
		rows[i] = int32(i)
	}
	g := matrix.NewDense(seeds, m.Dims[L])
	loss := kernels.SoftmaxCE(h, b.Labels, rows, norm, g)
	// The gradients of layer l's tensors sit in grads at off[l].
	off := make([]int, L)
	for l, n := 1, 0; l < L; l++ {
		for _, t := range m.Tensors(l - 1) {
			n += len(t)
		}
		off[l] = n
	}
	for l := L - 1; l >= 0; l-- {
		blk := b.Blocks[l]
		nt, din, dout := blk.Adj.Rows, m.Dims[l], m.Dims[l+1]
		o := off[l]
		dW := &matrix.Dense{Rows: din, Cols: dout, Data: grads[o : o+din*dout]}
		if err := kernels.GEMMTN(dW, agg[l], g); err != nil {
			return 0, nil, fmt.Errorf("minibatch: layer %d backward: %w", l+1, err)
		}
		o += din * dout
		kernels.ColumnSums(grads[o:o+dout], g)
		o += dout
		if sage {
			dR := &matrix.Dense{Rows: din, Cols: dout, Data: grads[o : o+din*dout]}
			if err := kernels.GEMMTN(dR, in[l].Prefix(nt), g); err != nil {
				return 0, nil, fmt.Errorf("minibatch: layer %d backward: %w", l+1, err)
			}
		}
		if l == 0 {
			break
		}
		dAgg := matrix.NewDense(nt, din)
		if err := kernels.GEMMNT(dAgg, g, m.W[l]); err != nil {
			return 0, nil, fmt.Errorf("minibatch: layer %d backward: %w", l+1, err)
		}
		dIn := matrix.NewDense(blk.Adj.Cols, din)
		if err := kernels.SpMMT(dIn, blk.Adj, dAgg); err != nil {
			return 0, nil, fmt.Errorf("minibatch: layer %d backward: %w", l+1, err)
		}
		if sage {
			dRoot := matrix.NewDense(nt, din)
			if err := kernels.GEMMNT(dRoot, g, m.Root[l]); err != nil {
				return 0, nil, fmt.Errorf("minibatch: layer %d backward: %w", l+1, err)
			}
			for i, v := range dRoot.Data {
				dIn.Data[i] += v
			}
		}
		// Through this layer's dropout and the layer below's ReLU (its
		// output is this layer's undropped input).
		kernels.DropoutReLUBackward(drop.mask(l, blk), dIn, out[l-1], nil)
		g = dIn
	}
	return loss, grads, nil
}

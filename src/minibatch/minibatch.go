// Package minibatch trains a GCN, GraphSAGE or GAT on one rank's sampled
// mini-batch (src/sample): forward and backward over the batch's
// per-layer blocks, on the CPU kernels, with the model's replicated
// parameters. A rank computes its whole batch locally from the features
// it fetched; the caller sums the gradients over ranks and steps.
//
// Layer l computes, for its block's Dst from its Src (Dst being Src's
// prefix), Z = (A·drop(H))·W + b, GraphSAGE adding drop(H)_Dst·Root;
// hidden layers apply ReLU; a GAT's layer attends over the block's edges
// (gat.go). Dropout falls on each layer's input, drawn as the engine
// draws it: keyed by (seed, step, layer, original node id), so a vertex's
// mask is the same whichever rank computes it; a GAT's attention dropout
// is keyed alike, by (seed, step, layer) and the edge's original ids.
package minibatch

import (
	"fmt"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/sample"
)

// Dropout is the dropout of a step: drop probability P, masks keyed by
// Seed and Step; Att is a GAT's attention dropout probability, a float64
// as the engine holds it so that the kept fraction rounds alike.
type Dropout struct {
	P    float32
	Att  float64
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
	seeds := len(b.Blocks[L-1].Dst)
	if seeds == 0 {
		return 0, grads, nil
	}
	if m.Arch().Attends() {
		return stepGAT(m, b, norm, drop, grads)
	}
	sage := m.Root != nil
	in := make([]*matrix.Dense, L)  // each layer's dropped input
	agg := make([]*matrix.Dense, L) // A·in
	out := make([]*matrix.Dense, L) // each layer's output (after ReLU)
	var xs *matrix.CSR              // layer 1's dropped input, where its rows came sparse
	h := b.X
	for l, blk := range b.Blocks {
		if l == 0 && b.XSparse != nil {
			var err error
			if xs, err = sparseInput(m, b, drop); err != nil {
				return 0, nil, err
			}
			out[0] = matrix.NewDense(blk.Adj.Rows, m.Dims[1])
			if err := sparseLayer(m, blk, xs, out[0]); err != nil {
				return 0, nil, err
			}
			kernels.AddBiasReLU(out[0], m.B[0], L > 1)
			h = out[0]
			continue
		}
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
		if l == 0 && xs != nil {
			if err := sparseBackward(m, blk, xs, g, grads[o:]); err != nil {
				return 0, nil, err
			}
			break
		}
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

// sparseInput is layer 1's input as its rows came, sparse, with the
// layer's dropout applied to the nonzeros (the same draws as on dense
// rows).
func sparseInput(m *model.GCN, b *sample.Batch, drop Dropout) (*matrix.CSR, error) {
	x, blk := b.XSparse, b.Blocks[0]
	if x.Rows != blk.Adj.Cols || x.Cols != m.Dims[0] {
		return nil, fmt.Errorf("minibatch: layer 1 reads %d×%d, its block has %d sources of width %d", x.Rows, x.Cols, blk.Adj.Cols, m.Dims[0])
	}
	mk := drop.mask(0, blk)
	if mk.P <= 0 {
		return x, nil
	}
	vals := make([]float32, len(x.Val))
	kernels.DropoutCSR(mk, vals, x)
	return &matrix.CSR{Rows: x.Rows, Cols: x.Cols, RowPtr: x.RowPtr, ColIdx: x.ColIdx, Val: vals}, nil
}

// sparseLayer is layer 1 on sparse rows xs, transform first: z = A·(xs·W)
// (GraphSAGE adding xs_Dst·Root), before bias and activation.
func sparseLayer(m *model.GCN, blk sample.Block, xs *matrix.CSR, z *matrix.Dense) error {
	xw := matrix.NewDense(xs.Rows, m.Dims[1])
	if err := kernels.SpMM(xw, xs, m.W[0], false); err != nil {
		return fmt.Errorf("minibatch: layer 1: %w", err)
	}
	if err := kernels.SpMM(z, blk.Adj, xw, false); err != nil {
		return fmt.Errorf("minibatch: layer 1: %w", err)
	}
	if m.Root != nil {
		if err := kernels.SpMM(z, xs.RowSlice(0, blk.Adj.Rows), m.Root[0], true); err != nil {
			return fmt.Errorf("minibatch: layer 1: %w", err)
		}
	}
	return nil
}

// sparseBackward writes layer 1's gradients into grads (W, b, Root, as
// Flat packs them) from g = ∂loss/∂Z: ∇W = xsᵀ·(Aᵀ·g), ∇Root = xs_Dstᵀ·g.
func sparseBackward(m *model.GCN, blk sample.Block, xs *matrix.CSR, g *matrix.Dense, grads []float32) error {
	din, dout := m.Dims[0], m.Dims[1]
	ag := matrix.NewDense(blk.Adj.Cols, dout)
	if err := kernels.SpMMT(ag, blk.Adj, g); err != nil {
		return fmt.Errorf("minibatch: layer 1 backward: %w", err)
	}
	if err := kernels.SpMMT(&matrix.Dense{Rows: din, Cols: dout, Data: grads[:din*dout]}, xs, ag); err != nil {
		return fmt.Errorf("minibatch: layer 1 backward: %w", err)
	}
	kernels.ColumnSums(grads[din*dout:din*dout+dout], g)
	if m.Root != nil {
		dR := &matrix.Dense{Rows: din, Cols: dout, Data: grads[din*dout+dout : 2*din*dout+dout]}
		if err := kernels.SpMMT(dR, xs.RowSlice(0, blk.Adj.Rows), g); err != nil {
			return fmt.Errorf("minibatch: layer 1 backward: %w", err)
		}
	}
	return nil
}

package minibatch

// GAT on a batch's blocks, as the full-graph engine computes it
// (src/train/gat.go has the math): per head, U = drop(H)·W,
// e_ij = LeakyReLU_0.2(a_l·U_i + a_r·U_j) over block row i's sampled
// sources j (the self loop among them), α = softmax_j(e), out_i =
// Σ_j d_ij α_ij U_j; hidden layers concatenate their heads and apply ELU
// after the bias, the last averages them. With full fanout a Dst row's
// sources are its whole neighbourhood, so the softmax is the full graph's.
//
// The attention runs on the CPU kernels the engine's host attention uses:
// a block's Dst rows are the targets and its Src rows the sources, whose
// first len(Dst) rows are the targets' own (so one [U | er] matrix over
// Src serves both sides). The neighbour side of the backward reads the
// block transposed: rows the sources, columns the targets.

import (
	"fmt"

	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/sample"
)

// gatFwd is what layer l's forward keeps for its backward.
type gatFwd struct {
	in      *matrix.Dense // the dropped input (nil: layer 1 on sparse rows)
	u, pay  *matrix.Dense // U over Src, [U | er] over Src
	el      *matrix.Dense // a_l·U over Src (the targets' are its prefix)
	st      kernels.GATState
	blk     *kernels.GATBlock // targets × sources
	out     *matrix.Dense     // the layer's output after bias and activation
	h, f    int
	concat  bool
	tgtIDs  []int64
	srcIDs  []int64
	attKey  uint64
	attKeep float32
}

// attention is layer l's attention dropout key and kept fraction, drawn as
// the engine draws it for the epoch it trains (a step here), so that a
// one-step epoch drops the engine's coefficients.
func (d Dropout) attention(l int) (uint64, float32) {
	if d.Att <= 0 {
		return 0, 1
	}
	return wire.Seed(d.Seed^0x6a7, d.Step<<8|uint64(l)), float32(1 - d.Att)
}

// stepGAT is Step for a GAT.
func stepGAT(m *model.GCN, b *sample.Batch, norm float64, drop Dropout, grads []float32) (float64, []float32, error) {
	L := m.Layers()
	seeds := len(b.Blocks[L-1].Dst)
	att := kernels.CPU{}
	fw := make([]gatFwd, L)
	var xs *matrix.CSR // layer 1's dropped input, where its rows came sparse
	h := b.X
	for l, blk := range b.Blocks {
		F := &fw[l]
		nt, ns := blk.Adj.Rows, blk.Adj.Cols
		F.h, F.f, F.concat = m.Heads[l], m.HeadWidth(l), l+1 < L
		hf := F.h * F.f
		F.u = matrix.NewDense(ns, hf)
		if l == 0 && b.XSparse != nil {
			var err error
			if xs, err = sparseInput(m, b, drop); err != nil {
				return 0, nil, err
			}
			if err := kernels.SpMM(F.u, xs, m.W[0], false); err != nil {
				return 0, nil, fmt.Errorf("minibatch: layer 1: %w", err)
			}
		} else {
			if h.Rows != ns || h.Cols != m.Dims[l] {
				return 0, nil, fmt.Errorf("minibatch: layer %d reads %d×%d, its block has %d sources of width %d", l+1, h.Rows, h.Cols, ns, m.Dims[l])
			}
			F.in = h
			if mk := drop.mask(l, blk); mk.P > 0 {
				F.in = matrix.NewDense(h.Rows, h.Cols)
				kernels.Dropout(mk, F.in, h)
			}
			if err := kernels.GEMM(F.u, F.in, m.W[l], false); err != nil {
				return 0, nil, fmt.Errorf("minibatch: layer %d: %w", l+1, err)
			}
		}
		F.pay, F.el = matrix.NewDense(ns, hf+F.h), matrix.NewDense(ns, F.h)
		att.GATPayload(F.pay, F.el, F.u, m.AttL[l], m.AttR[l], F.h)
		F.st = kernels.GATState{El: F.el.Prefix(nt), M: matrix.NewDense(nt, F.h), S: matrix.NewDense(nt, F.h),
			O: matrix.NewDense(nt, hf), O2: matrix.NewDense(nt, hf), C: matrix.NewDense(nt, F.h)}
		F.srcIDs = blk.SrcOrig
		if F.srcIDs != nil {
			F.tgtIDs = F.srcIDs[:nt]
		}
		F.attKey, F.attKeep = drop.attention(l)
		F.blk = &kernels.GATBlock{A: blk.Adj, H: F.h, F: F.f, Key: F.attKey, Keep: F.attKeep, RowIDs: F.tgtIDs, ColIDs: F.srcIDs}
		att.GATStart(F.st)
		att.GATAttend(F.blk, F.pay, F.st)
		z := matrix.NewDense(nt, m.Dims[l+1])
		att.GATFinish(z, F.st, F.h, F.concat)
		kernels.AddBiasReLU(z, m.B[l], false)
		if F.concat {
			kernels.ELU(z)
		}
		F.out, h = z, z
	}
	rows := make([]int32, seeds)
	for i := range rows {
		rows[i] = int32(i)
	}
	g := matrix.NewDense(seeds, m.Dims[L])
	loss := kernels.SoftmaxCE(h, b.Labels, rows, norm, g)
	off := 0
	offs := make([]int, L)
	for l := range L {
		offs[l] = off
		for _, t := range m.Tensors(l) {
			off += len(t)
		}
	}
	for l := L - 1; l >= 0; l-- {
		F, blk := &fw[l], b.Blocks[l]
		nt, ns, din, hf := blk.Adj.Rows, blk.Adj.Cols, m.Dims[l], F.h*F.f
		o := offs[l]
		dW := &matrix.Dense{Rows: din, Cols: hf, Data: grads[o : o+din*hf]}
		o += din * hf
		kernels.ColumnSums(grads[o:o+m.Dims[l+1]], g)
		o += m.Dims[l+1]
		dAl := &matrix.Dense{Rows: 1, Cols: hf, Data: grads[o : o+hf]}
		dAr := &matrix.Dense{Rows: 1, Cols: hf, Data: grads[o+hf : o+2*hf]}
		// The target side from the forward's sums, then each source's
		// share of its targets' gradients.
		gpay, dEl, dEr := matrix.NewDense(nt, hf+3*F.h), matrix.NewDense(ns, F.h), matrix.NewDense(ns, F.h)
		att.GATGradRows(gpay, dEl.Prefix(nt), dEr, g, F.st, F.h, F.concat)
		dU := matrix.NewDense(ns, hf)
		nbr := &kernels.GATBlock{A: blk.Adj.Transpose(), H: F.h, F: F.f, Key: F.attKey, Keep: F.attKeep, RowIDs: F.srcIDs, ColIDs: F.tgtIDs}
		att.GATNeighbour(nbr, gpay, F.pay, dU, dEr)
		att.GATScoreGrads(dU, dAl, dAr, dEl, dEr, F.u, F.pay, m.AttL[l], m.AttR[l], F.h)
		if F.in == nil {
			if err := kernels.SpMMT(dW, xs, dU); err != nil {
				return 0, nil, fmt.Errorf("minibatch: layer 1 backward: %w", err)
			}
			break
		}
		if err := kernels.GEMMTN(dW, F.in, dU); err != nil {
			return 0, nil, fmt.Errorf("minibatch: layer %d backward: %w", l+1, err)
		}
		if l == 0 {
			break
		}
		dIn := matrix.NewDense(ns, din)
		if err := kernels.GEMMNT(dIn, dU, m.W[l]); err != nil {
			return 0, nil, fmt.Errorf("minibatch: layer %d backward: %w", l+1, err)
		}
		// Through this layer's dropout and the layer below's ELU (its
		// output is this layer's undropped input).
		kernels.Dropout(drop.mask(l, blk), dIn, dIn)
		kernels.ELUBackward(dIn, fw[l-1].out)
		g = dIn
	}
	return loss, grads, nil
}

package train

import (
	"sancus/collectives"
	"sancus/kernels"
	"sancus/kernels/matrix"
)

// Variation-gap votes on the drift ‖H̄ − H̄_last‖_F / ‖H̄_last‖_F of a rank's
// noise-free rows (layers.go says why not the rows as trained). Computing
// H̄ for every row would be a second forward pass; it is computed for a
// fixed sample of rows instead: every k-th row, at least driftSampleMin
// of them and one in driftSampleEvery, through the same kernels on
// row-subsets of the input and of Â's blocks.
//
// The sampled ratio estimates the whole block's: numerator and denominator
// are sums over the same s rows, so with per-row squared drifts of
// coefficient of variation v the relative error of the estimated squared
// ratio is about v·√(2/s) (both sums' errors), and of the drift half that:
// at s = 1024 and v ≤ 1, about 2%: far finer than the steps between the
// drifts a vote compares with ε_H. TestSampledDriftTracksWholeBlock
// measures it on a generated graph's embeddings. A larger sample buys
// little: its rows come from memory each epoch, a cost that grows with it,
// for a bound that shrinks only as its square root.
const (
	driftSampleMin   = 1024
	driftSampleEvery = 64
)

// driftSampleRows is the sample of n rows: every k-th.
func driftSampleRows(n int) []int32 {
	s := max(driftSampleMin, n/driftSampleEvery)
	k := max(1, n/s) // so at least s rows
	rows := make([]int32, 0, (n+k-1)/k)
	for r := 0; r < n; r += k {
		rows = append(rows, int32(r))
	}
	return rows
}

// sampleBuf returns *buf, allocated at the sample's rows and width cols.
func (e *Engine) sampleBuf(buf **matrix.Dense, cols int) *matrix.Dense {
	if *buf == nil || (*buf).Cols != cols {
		*buf = e.be.NewDense(len(e.drift.rows), cols)
	}
	return *buf
}

// sampled is in's noise-free rows at the sample: its shadow, or, where the
// shadow stopped (after a residual, or a layer that sends HW), the sampled
// rows of the activation itself, gathered into *buf.
func (e *Engine) sampled(in act, buf **matrix.Dense) (*matrix.Dense, error) {
	if in.clean != nil {
		return in.clean, nil
	}
	out := e.sampleBuf(buf, in.h.Cols)
	if err := kernels.GatherRows(collectives.Bytes(e.host(out)), collectives.Bytes(e.host(in.h)), e.drift.rows, 4*in.h.Cols); err != nil {
		return nil, err
	}
	e.be.Upload(out)
	return out, nil
}

// cleanRef writes into out the sampled rows of H̄·w: the input operand's
// when first, else in's.
func (e *Engine) cleanRef(out *matrix.Dense, first bool, in act, w *matrix.Dense, buf **matrix.Dense) error {
	if first {
		return e.drift.in.Mul(out, w)
	}
	x, err := e.sampled(in, buf)
	if err != nil {
		return err
	}
	return e.be.GEMM(out, x, w, false)
}

// sampleRowsOf is Â's block b at the sample rows, cut once per block
// (global-batch blocks are the same every epoch).
func (e *Engine) sampleRowsOf(b *matrix.CSR) *matrix.CSR {
	if e.drift.blocks == nil {
		e.drift.blocks = map[*matrix.CSR]*matrix.CSR{}
	}
	s, ok := e.drift.blocks[b]
	if !ok {
		if len(e.drift.blocks) >= 8*e.P { // cluster-batch makes new blocks every step
			clear(e.drift.blocks)
		}
		s = b.SelectRows(e.drift.rows)
		e.drift.blocks[b] = s
	}
	return s
}

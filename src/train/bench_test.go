package train

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/graph"
)

var (
	benchOnce sync.Once
	benchDS   *graph.Dataset
	benchErr  error
)

// benchGraph is the reference graph: 100k nodes, 1M undirected
// edges, 128 binary features, 16 classes, generated once per test binary.
func benchGraph(b *testing.B) *graph.Dataset {
	benchOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "sancus-bench-100k")
		if _, err := os.Stat(filepath.Join(dir, "test.txt")); err != nil {
			cfg := graph.GenConfig{Model: "planted", Nodes: 100000, Edges: 1000000, Features: 128, FeatureNNZ: 16,
				Classes: 16, PIn: 0.8, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1, Seed: 1}
			if benchErr = graph.Generate(dir, cfg); benchErr != nil {
				return
			}
		}
		benchDS, benchErr = graph.Load(dir, graph.LoadOptions{NormalizeFeatures: true})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDS
}

// BenchmarkEpoch100k reports ms per training epoch (forward, backward,
// Adam) on one rank, evaluation excluded.
func BenchmarkEpoch100k(b *testing.B) {
	ds := benchGraph(b)
	for _, pre := range []bool{true, false} {
		name := "precompute"
		if !pre {
			name = "plain"
		}
		b.Run(name, func(b *testing.B) {
			cfg := Defaults()
			cfg.Model.Precompute = pre
			cfg.Optim.Epochs = 20
			cfg.Run.EvalEvery = 0
			out, err := RunInProcess(ds, 1, cfg)
			res := out.Result
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.MeanEpochMs, "ms/epoch")
		})
	}
}

// BenchmarkBlockProducts sets a rank's P block products (its block row of
// Â cut into P column blocks, each multiplied as it arrives) against one
// product over the same nonzeros, at P = 8, 64 and 512 of the 100k graph,
// 16 columns: every row of every block, and each block's occupied rows
// alone (cache.occupied). Reported as times one product.
func BenchmarkBlockProducts(b *testing.B) {
	ahat := graph.Normalize(benchGraph(b).Adj)
	const width = 16
	h := matrix.NewDense(ahat.Cols, width)
	for i := range h.Data {
		h.Data[i] = float32(i%7) - 3
	}
	for _, p := range []int{8, 64, 512} {
		rows := ahat.Rows / p
		row := rowBlock(ahat, rows)
		blocks, hs := make([]*matrix.CSR, p), make([]*matrix.Dense, p)
		for j := range p {
			lo, hi := j*ahat.Cols/p, (j+1)*ahat.Cols/p
			blocks[j] = columnBlock(row, lo, hi)
			hs[j] = &matrix.Dense{Rows: hi - lo, Cols: width, Data: h.Data[lo*width : hi*width]}
		}
		occ := occupiedRows(blocks)
		out := matrix.NewDense(rows, width)
		one := bestOf(15, func() { kernels.SpMM(out, row, h, false) })
		all := bestOf(15, func() {
			for j := range p {
				kernels.SpMM(out, blocks[j], hs[j], j > 0)
			}
		})
		compact := bestOf(15, func() {
			for j := range p {
				if j > 0 && occ[j] != nil {
					kernels.SpMMRows(out, blocks[j], hs[j], occ[j], true)
				} else {
					kernels.SpMM(out, blocks[j], hs[j], j > 0)
				}
			}
		})
		b.Logf("P = %4d: one product %8.1f µs; %d block products %.2fx it, over occupied rows %.2fx", p, one.Seconds()*1e6, p, all.Seconds()/one.Seconds(), compact.Seconds()/one.Seconds())
	}
}

func bestOf(n int, f func()) time.Duration {
	best := time.Duration(1 << 62)
	for range n {
		t := time.Now()
		f()
		best = min(best, time.Since(t))
	}
	return best
}

// rowBlock is a's first rows rows.
func rowBlock(a *matrix.CSR, rows int) *matrix.CSR {
	end := a.RowPtr[rows]
	return &matrix.CSR{Rows: rows, Cols: a.Cols, RowPtr: a.RowPtr[:rows+1], ColIdx: a.ColIdx[:end], Val: a.Val[:end]}
}

// columnBlock is a's columns lo..hi, numbered from 0.
func columnBlock(a *matrix.CSR, lo, hi int) *matrix.CSR {
	c := &matrix.CSR{Rows: a.Rows, Cols: hi - lo, RowPtr: make([]int64, a.Rows+1)}
	for r := range a.Rows {
		for k := a.RowPtr[r]; k < a.RowPtr[r+1]; k++ {
			if col := int(a.ColIdx[k]); col >= lo && col < hi {
				c.ColIdx, c.Val = append(c.ColIdx, int32(col-lo)), append(c.Val, a.Val[k])
			}
		}
		c.RowPtr[r+1] = int64(len(c.ColIdx))
	}
	return c
}

package train

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/prepare"
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
// product over the same nonzeros, 16 columns, on one kernel thread (as a
// rank has at P ≥ 64): every row of every block; each block's occupied
// rows alone (cache.occupied); and the peers' blocks merged into runs
// where they are shallow, as training multiplies them (merge.go).
// Reported as times one product. The 100k graph's first rows/P rows at
// P = 8, 64 and 512; with SANCUS_BENCH_1M naming a generated 1M-node
// graph (gen --nodes 1000000 --edges 10000000), also the busiest rank of
// its contiguous partition (what rank replay runs) at P = 64 and 512.
func BenchmarkBlockProducts(b *testing.B) {
	defer kernels.SetThreads(kernels.Threads())
	kernels.SetThreads(1)
	ahat := graph.Normalize(benchGraph(b).Adj)
	for _, p := range []int{8, 64, 512} {
		off := make([]int64, p+1)
		for j := range off {
			off[j] = int64(j * ahat.Cols / p)
		}
		blockProducts(b, "100k", ahat, off, 0)
	}
	dir := os.Getenv("SANCUS_BENCH_1M")
	if dir == "" {
		return
	}
	ds, err := graph.Load(dir, graph.LoadOptions{Classes: -1})
	if err != nil {
		b.Fatal(err)
	}
	ahat = graph.Normalize(ds.Adj)
	for _, p := range []int{64, 512} {
		off, err := prepare.BalancedRanges(ahat, p)
		if err != nil {
			b.Fatal(err)
		}
		busiest := 0
		for r := range p {
			if nnzIn(ahat, off[r], off[r+1]) > nnzIn(ahat, off[busiest], off[busiest+1]) {
				busiest = r
			}
		}
		blockProducts(b, "1M", ahat, off, busiest)
	}
}

// blockProducts times rank r's block row of ahat, cut at off, as one
// product and as its P column blocks, own block first.
func blockProducts(b *testing.B, name string, ahat *matrix.CSR, off []int64, r int) {
	const width = 16
	p := len(off) - 1
	h := matrix.NewDense(ahat.Cols, width)
	for i := range h.Data {
		h.Data[i] = float32(i%7) - 3
	}
	row := rowRange(ahat, int(off[r]), int(off[r+1]))
	blocks, hs, rows := make([]*matrix.CSR, p), make([]*matrix.Dense, p), make([]int, p)
	for j := range p {
		lo, hi := int(off[j]), int(off[j+1])
		blocks[j] = columnBlock(row, lo, hi)
		hs[j] = &matrix.Dense{Rows: hi - lo, Cols: width, Data: h.Data[lo*width : hi*width]}
		rows[j] = hi - lo
	}
	occ := occupiedRows(blocks, map[*matrix.CSR]kernels.OccupiedRows{})
	order := slices.Collect(ownFirst(r, p))
	// The runs as a cache makes them: the peers' rows in its slab.
	be := kernels.CPU{}
	c := &cache{width: width, rows: rows, blocks: blocks, me: r, host: make([][]float32, p), dev: make([]*matrix.Dense, p)}
	c.slotsLaid(be, matrix.Make[float32](c.slotFloats(true)), true)
	for j := range p {
		copy(c.host[j], hs[j].Data)
	}
	c.mergeRuns(be, map[runKey]mergedRun{})
	out := matrix.NewDense(row.Rows, width)
	blockByBlock := func(j int, k int) {
		switch {
		case blocks[j].NNZ() == 0:
		case k > 0 && occ[j].Rows != nil:
			kernels.SpMMOccupied(out, blocks[j], hs[j], occ[j], true)
		default:
			kernels.SpMM(out, blocks[j], hs[j], k > 0)
		}
	}
	runs := 0
	if c.merge != nil {
		runs = len(c.merge.runs)
	}
	// They take turns, best of 40 each: on a shared machine a load that
	// comes and goes then weighs on all of them alike.
	t := bestOfTurns(40, func() { kernels.SpMM(out, row, h, false) }, func() {
		for k, j := range order {
			kernels.SpMM(out, blocks[j], hs[j], k > 0)
		}
	}, func() {
		for k, j := range order {
			blockByBlock(j, k)
		}
	}, func() {
		if c.merge == nil {
			return
		}
		blockByBlock(r, 0)
		for _, run := range c.merge.runs {
			switch {
			case run.block.NNZ() == 0:
			case run.occ.Rows != nil:
				kernels.SpMMOccupied(out, run.block, c.merge.slab, run.occ, true)
			default:
				kernels.SpMM(out, run.block, c.merge.slab, true)
			}
		}
	})
	one := t[0].Seconds()
	merged := "not merged"
	if runs > 0 {
		merged = fmt.Sprintf("merged into %d runs %.2fx", runs, t[3].Seconds()/one)
	}
	b.Logf("%s P = %4d: rank %d, %d rows, %d nonzeros; one product %8.1f µs; %d block products %.2fx it, over occupied rows %.2fx, %s",
		name, p, r, row.Rows, row.NNZ(), one*1e6, p, t[1].Seconds()/one, t[2].Seconds()/one, merged)
}

// nnzIn is the nonzeros of a's rows lo..hi.
func nnzIn(a *matrix.CSR, lo, hi int64) int64 { return a.RowPtr[hi] - a.RowPtr[lo] }

// bestOfTurns runs fs in turn n times and returns each one's best time.
func bestOfTurns(n int, fs ...func()) []time.Duration {
	best := make([]time.Duration, len(fs))
	for i := range best {
		best[i] = time.Duration(1 << 62)
	}
	for range n {
		for i, f := range fs {
			t := time.Now()
			f()
			best[i] = min(best[i], time.Since(t))
		}
	}
	return best
}

// rowRange is a's rows lo..hi.
func rowRange(a *matrix.CSR, lo, hi int) *matrix.CSR {
	ptr := make([]int64, hi-lo+1)
	for i := range ptr {
		ptr[i] = a.RowPtr[lo+i] - a.RowPtr[lo]
	}
	s, e := a.RowPtr[lo], a.RowPtr[hi]
	return &matrix.CSR{Rows: hi - lo, Cols: a.Cols, RowPtr: ptr, ColIdx: a.ColIdx[s:e], Val: a.Val[s:e]}
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

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"sancus/collectives"
	"sancus/collectives/mpi"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/launch"
	"sancus/src/atomicfile"
	"sancus/src/graph"
	"sancus/src/partition"
	"sancus/src/prepare"
	"sancus/src/result"
	"sancus/src/train"
)

const benchUsage = `Usage: sancus bench kernels|comm|triad|rank [flags]

  kernels  this build's kernels (GEMM, SpMM, the wire codecs) on one rank
  comm     the collectives and point-to-point messages, under mpirun
  triad    the CPU's memory bandwidth and GEMM peak, and epochs against them
  rank     one rank of a P-rank job replayed alone (--shards DIR --rank R)

Run 'sancus bench <name> --help' for its flags.
`

func runBench(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: sancus bench kernels|comm|triad|rank [flags] (see --help of each)")
	}
	if a := args[0]; a == "-h" || a == "--help" || a == "help" {
		fmt.Print(benchUsage)
		return nil
	}
	useProcs(1) // as training runs its kernels
	blasGEMM = baselineGEMM()
	switch args[0] {
	case "kernels":
		return benchKernels(args[1:])
	case "comm":
		return benchComm(args[1:])
	case "triad":
		return benchTriad(args[1:])
	case "rank":
		return benchRank(args[1:])
	}
	return fmt.Errorf("usage: sancus bench kernels|comm|triad|rank [flags] (see --help of each)")
}

// benchTriad prints the CPU's STREAM triad rate (GB/s, on the kernel
// threads) and its GEMM peak (GFLOP/s: the best of this build's GEMM and,
// with -tags openblas, OpenBLAS's, on compute-bound shapes), and, for each
// results JSON named (from train --profile-kernels), its epoch against two
// bounds: the memory-bound time (the bytes the epoch must touch, rank 0's,
// over the triad) and the roofline (per class of kernels, the larger of
// its bytes over the triad and its flops over the peak, summed).
func benchTriad(args []string) error {
	fs := newFlags("bench triad", "bench triad [--mb N] [RESULTS.json ...]: the STREAM triad a = b + s·c and the GEMM peak, best of 10, and each run's memory-bound and roofline epoch")
	mb := fs.Int("mb", 128, "size of each of the three arrays, in MB (far past the last-level cache)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mb < 1 {
		return fmt.Errorf("--mb must be ≥ 1, got %d", *mb)
	}
	var runs []result.Run
	for _, p := range fs.Args() {
		b, err := atomicfile.ReadAll(p, result.MaxBytes)
		if err != nil {
			return err
		}
		var r result.Run
		if err := json.Unmarshal(b, &r); err != nil || r.Result == nil {
			return fmt.Errorf("%s: not a sancus results JSON (%v)", p, err)
		}
		if len(r.Result.PerRank) == 0 || r.Result.PerRank[0].StepMB == 0 || len(r.Result.Curve) == 0 {
			return fmt.Errorf("%s: no compulsory bytes: train it with --profile-kernels", p)
		}
		runs = append(runs, r)
	}
	gbs := triadGBs(*mb << 18)
	fmt.Printf("triad %.2f GB/s (%d threads, %s)\n", gbs, kernels.Threads(), kernels.SIMD())
	peak, who, err := gemmPeak()
	if err != nil {
		return err
	}
	fmt.Printf("gemm peak %.1f GFLOP/s (%s)\n", peak, who)
	for i, r := range runs {
		rk, n := r.Result.PerRank[0], float64(len(r.Result.Curve))
		perEpoch := rk.StepMB / n
		bound := perEpoch / gbs // MB over GB/s: ms
		fmt.Printf("%s: %.1f MB an epoch must touch, memory-bound %.2f ms; measured %.2f ms, %.2fx the bound\n",
			fs.Arg(i), perEpoch, bound, r.Result.MeanEpochMs, r.Result.MeanEpochMs/bound)
		if rk.StepKernelGFLOP == nil {
			continue // a results file from before the flops were counted
		}
		roof, terms := roofline(rk, n, gbs, peak)
		fmt.Printf("  roofline %.2f ms (%s); measured %.2fx the roofline\n", roof, terms, r.Result.MeanEpochMs/roof)
	}
	return nil
}

// roofline is a run's least epoch time from its counts per class: the
// larger of the class's bytes over gbs and its flops over peak (GFLOP/s),
// summed over the classes, per epoch of n; and each class's term.
func roofline(rk result.RankStats, n, gbs, peak float64) (float64, string) {
	var ms float64
	var terms []string
	for _, k := range kernels.TimedClasses {
		mem, flop := rk.StepKernelMB[k]/n/gbs, rk.StepKernelGFLOP[k]/n/peak*1e3
		if mem == 0 && flop == 0 {
			continue
		}
		ms += max(mem, flop)
		what := "memory"
		if flop > mem {
			what = fmt.Sprintf("%.2f GFLOP", rk.StepKernelGFLOP[k]/n)
		}
		terms = append(terms, fmt.Sprintf("%s %.2f %s", k, max(mem, flop), what))
	}
	return ms, strings.Join(terms, ", ")
}

// gemmPeak is the best GFLOP/s of this build's GEMM and, where linked,
// OpenBLAS's sgemm, on shapes wide enough to be compute-bound (the widest
// of the models' products), each the best of 10 on the kernel threads.
func gemmPeak() (float64, string, error) {
	const n = 1 << 15
	timeIt := func(f func() error) (time.Duration, error) {
		var err error
		d := best(10, func() {
			if e := f(); e != nil {
				err = e
			}
		})
		return d, err
	}
	var peak float64
	who := ""
	for _, k := range []int{128, 256} {
		a, b, c := matrix.NewDense(n, k), matrix.NewDense(k, 256), matrix.NewDense(n, 256)
		for i := range a.Data {
			a.Data[i] = float32(i%7) - 3
		}
		for i := range b.Data {
			b.Data[i] = float32(i%5) - 2
		}
		flop := 2 * float64(n) * float64(k) * 256
		gemms := map[string]func() error{"sancus": func() error { return kernels.GEMM(c, a, b, false) }}
		if blasGEMM != nil {
			gemms["OpenBLAS"] = func() error { return blasGEMM(c, a, b, false) }
		}
		for name, f := range gemms {
			d, err := timeIt(f)
			if err != nil {
				return 0, "", fmt.Errorf("gemm peak: %s: %w", name, err)
			}
			if r := flop / d.Seconds() / 1e9; r > peak {
				peak, who = r, fmt.Sprintf("%s, %d×%d · %d×256", name, n, k, k)
			}
		}
	}
	return peak, who, nil
}

// triadGBs is the best of 10 triads over arrays of n floats, in GB/s.
func triadGBs(n int) float64 {
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range b {
		b[i], c[i] = 1, 2
	}
	kernels.Triad(a, b, c, 3)
	return float64(12*n) / best(10, func() { kernels.Triad(a, b, c, 3) }).Seconds() / 1e9
}

// best runs f reps times and returns the fastest duration: the figure least
// disturbed by other work on a shared node.
func best(reps int, f func()) time.Duration {
	b := time.Duration(1<<63 - 1)
	for i := 0; i < reps; i++ {
		t := time.Now()
		f()
		b = min(b, time.Since(t))
	}
	return b
}

// KernelBench is what `sancus bench kernels` measures, in one process run.
type KernelBench struct {
	Dataset     string  `json:"dataset"`
	Device      string  `json:"device"`
	Nodes       int     `json:"nodes"`
	NNZ         int64   `json:"nnz_ahat"`
	Threads     int     `json:"threads"`
	SIMD        string  `json:"simd"`
	TriadGBs    float64 `json:"triad_gb_s"`
	SpMMGBs     float64 `json:"spmm_gb_s"`
	SpMMMs      float64 `json:"spmm_ms"`
	SpMMOfTriad float64 `json:"spmm_fraction_of_triad"`
	// Bytes the gathers really move: every nonzero pulls a whole row of H
	// (here one 64-byte line) unless it is still cached.
	SpMMGatherGBs float64 `json:"spmm_gathered_gb_s"`
	// The same product after a reverse Cuthill–McKee renumbering.
	SpMMRCMGBs     float64   `json:"spmm_rcm_gb_s"`
	SpMMRCMOfTriad float64   `json:"spmm_rcm_fraction_of_triad"`
	EpochRCMMs     float64   `json:"epoch_rcm_ms"`
	GEMMGflops     float64   `json:"gemm_gflop_s"`
	EpochMs        float64   `json:"epoch_ms"`
	EpochPlainMs   float64   `json:"epoch_plain_ms"`
	GEMMTable      []GEMMRow `json:"gemm_table"`
	SpMMTable      []SpMMRow `json:"spmm_table"`
	// Sequential read rates (CPU) of an array the size of this graph's ÂX
	// and of a 2 GiB one (the 4M-node graph's ÂX, far past any cache): what
	// the GEMMs of layer 1 stream per epoch, from cache and from memory.
	ReadAXGBs    float64 `json:"read_ax_gb_s,omitempty"`
	ReadLargeGBs float64 `json:"read_2gib_gb_s,omitempty"`
}

// GEMMRow is one GNN GEMM shape, sancus's kernel next to OpenBLAS's sgemm
// on the same matrices (0 when the binary was built without -tags openblas).
type GEMMRow struct {
	Shape      string  `json:"shape"`
	Ms         float64 `json:"ms"`
	GFlops     float64 `json:"gflop_s"`
	OpenBLASMs float64 `json:"openblas_ms"`
	OfOpenBLAS float64 `json:"fraction_of_openblas"` // OpenBLAS time / ours: ≥ 1 is faster
	MaskedMs   float64 `json:"with_dropout_ms"`      // the same product with dropout drawn inside (the first layer's)
}

// SpMMRow is Â·H at one width against the triad.
type SpMMRow struct {
	Width     int     `json:"width"`
	Ms        float64 `json:"ms"`
	GBs       float64 `json:"gb_s_compulsory"`
	OfTriad   float64 `json:"fraction_of_triad"`
	GatherGBs float64 `json:"gb_s_gathered"` // counting every gathered row of H
	// SeqReadGBs is the rate the CPU reads an array the size of H in order:
	// the gathers' ceiling, since scattered rows come no faster than
	// sequential ones from the same level of the memory (an H small enough
	// to sit partly in L2 can beat it there). CeilingOfTriad is the share
	// of the triad the compulsory bytes would reach if every gather ran at
	// that rate.
	SeqReadGBs     float64 `json:"gb_s_sequential_read_of_h,omitempty"`
	CeilingOfTriad float64 `json:"ceiling_fraction_of_triad,omitempty"`
	// GatherMs is the same product's gathers alone (kernels.GatherSum: the
	// rows of H each row of Â reads, summed, no values and no products),
	// timed in turns with the product. No Â·H runs faster than its gathers,
	// so GatherCeilingOfTriad, the compulsory bytes' share of the triad at
	// that time, is a ceiling measured on the gathers' own pattern.
	GatherMs             float64 `json:"gathers_alone_ms,omitempty"`
	GatherCeilingOfTriad float64 `json:"gather_ceiling_fraction_of_triad,omitempty"`
	// InL2Ms is the same product, the same loop over the same Â, with every
	// column folded into the rows of an H of 256 KB, so each gathered row
	// is in L2: what its instructions and Â's stream cost when no gather
	// misses. InL2OfTriad is the compulsory bytes' share of the triad at
	// that time: where the loop, not the memory, stops the product.
	InL2Ms      float64 `json:"gathers_in_l2_ms,omitempty"`
	InL2OfTriad float64 `json:"gathers_in_l2_fraction_of_triad,omitempty"`
}

// blasGEMM is OpenBLAS's sgemm in a binary built with -tags openblas
// (baselineGEMM), named as the benchmarks start.
var blasGEMM func(c, a, b *matrix.Dense, transA bool) error

func benchKernels(args []string) error {
	fs := newFlags("bench kernels", "bench kernels [--data DIR] [--out FILE]")
	data := fs.String("data", "", "dataset directory (default: generate the 100k-node / 1M-edge reference graph)")
	out := fs.String("out", "", "also write the figures as JSON to `FILE` (make bench-kernels: results/bench/kernels.json)")
	epochs := fs.Int("epochs", 20, "epochs timed per training mode")
	var device kernels.Device
	fs.Var(&device, "device", "kernels backend to measure: cpu, or cuda in a binary built with make cuda")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := outFile(*out, "the figures' JSON file", "kernels.json"); err != nil {
		return err
	}
	dir := *data
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "sancus-bench-100k")
		if _, err := os.Stat(filepath.Join(dir, "test.txt")); err != nil {
			fmt.Println("generating the reference graph (100,000 nodes, 1,000,000 edges, 128 features, 16 classes)")
			cfg := graph.GenConfig{Model: "planted", Nodes: 100000, Edges: 1000000, Features: 128, FeatureNNZ: 16,
				Classes: 16, PIn: 0.8, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1, Seed: 1}
			if err := graph.Generate(dir, cfg); err != nil {
				return err
			}
		}
	}
	ds, err := graph.Load(dir, graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		return err
	}
	ahat := graph.Normalize(ds.Adj)
	be, err := kernels.Open(device, 0)
	if err != nil {
		return err
	}
	defer be.Close()
	dev, ok := be.(timedBackend)
	if !ok {
		return fmt.Errorf("bench kernels: backend %s cannot be timed", be.Name())
	}
	r := KernelBench{Dataset: dir, Device: dev.Device(), Nodes: ds.N, NNZ: ahat.NNZ(), Threads: kernels.Threads(), SIMD: kernels.SIMD()}
	// timed waits for the device, so a figure covers the work, not its launch.
	timed := func(reps int, f func()) time.Duration {
		f()
		dev.Sync()
		return best(reps, func() { f(); dev.Sync() })
	}

	// STREAM triad over arrays far larger than the last-level cache.
	n := 32 << 20
	a, b, c := be.NewDense(n, 1), be.NewDense(n, 1), be.NewDense(n, 1)
	for i := range b.Data {
		b.Data[i], c.Data[i] = 1, 2
	}
	be.Upload(b)
	be.Upload(c)
	d := timed(10, func() { dev.Triad(a, b, c, 3) })
	r.TriadGBs = float64(12*n) / d.Seconds() / 1e9

	// SpMM Â·H at the hidden width; traffic counted as the compulsory bytes.
	const w = 16
	h, out16 := be.NewDense(ds.N, w), be.NewDense(ds.N, w)
	for i := range h.Data {
		h.Data[i] = 1
	}
	be.Upload(h)
	d = timed(20, func() { be.SpMM(out16, ahat, h, false) })
	bytes := float64(ahat.NNZ())*8 + float64(ahat.Rows+1)*8 + 2*float64(ds.N*w)*4
	r.SpMMMs = ms(d)
	r.SpMMGBs = bytes / d.Seconds() / 1e9
	r.SpMMOfTriad = r.SpMMGBs / r.TriadGBs
	r.SpMMGatherGBs = (float64(ahat.NNZ())*(8+4*w) + float64(ds.N*w)*4) / d.Seconds() / 1e9

	// The same product after a locality order: what the kernel reaches when
	// a row's neighbours sit near each other in H.
	rds := prepare.Reorder(ds, partition.RCM(ds.Adj))
	ahatR := graph.Normalize(rds.Adj)
	d = timed(20, func() { be.SpMM(out16, ahatR, h, false) })
	r.SpMMRCMGBs = bytes / d.Seconds() / 1e9
	r.SpMMRCMOfTriad = r.SpMMRCMGBs / r.TriadGBs

	x := be.NewDense(ds.N, 128)
	wt := be.NewDense(128, w)
	for i := range x.Data { // untouched pages would all read the one zero page, from cache
		x.Data[i] = float32(i%13) * 0.01
	}
	be.Upload(x)
	d = timed(10, func() { be.GEMM(out16, x, wt, false) })
	r.GEMMGflops = 2 * float64(ds.N) * 128 * w / d.Seconds() / 1e9
	if err := be.Err(); err != nil {
		return err
	}

	if r.SpMMTable, err = spmmTable(ahat, r.TriadGBs, timed, be); err != nil {
		return err
	}
	if device == kernels.DeviceCPU {
		for i := range r.SpMMTable {
			x := &r.SpMMTable[i]
			x.SeqReadGBs = readRate(ahat.Cols * x.Width)
			gatherSec := float64(ahat.NNZ()) * 4 * float64(x.Width) / (x.SeqReadGBs * 1e9)
			x.CeilingOfTriad = x.GBs * (x.Ms / 1e3) / gatherSec / r.TriadGBs
		}
		r.ReadAXGBs = readRate(ds.N * 128)
		r.ReadLargeGBs = readRate(512 << 20)
	}
	if r.GEMMTable, err = gemmTable(ds.N, timed, be); err != nil {
		return err
	}

	for _, run := range []struct {
		pre bool
		ds  *graph.Dataset
		ms  *float64
	}{{true, ds, &r.EpochMs}, {false, ds, &r.EpochPlainMs}, {true, rds, &r.EpochRCMMs}} {
		cfg := train.Defaults()
		cfg.Optim.Epochs, cfg.Run.EvalEvery, cfg.Model.Precompute, cfg.Run.Device = *epochs, 0, run.pre, device
		out, err := runInProcess(run.ds, 1, cfg)
		if err != nil {
			return err
		}
		*run.ms = out.Result.MeanEpochMs
	}
	fmt.Printf("graph            %s: %d nodes, %d nonzeros in Â\n", dir, r.Nodes, r.NNZ)
	fmt.Printf("device           %s\n", r.Device)
	fmt.Printf("kernels          %s, %d threads\n", r.SIMD, r.Threads)
	fmt.Printf("triad            %8.2f GB/s\n", r.TriadGBs)
	fmt.Printf("SpMM Â·H (w=16)  %8.2f GB/s compulsory bytes (%.2f ms, %.0f%% of triad); %.2f GB/s counting every gathered row\n",
		r.SpMMGBs, r.SpMMMs, 100*r.SpMMOfTriad, r.SpMMGatherGBs)
	fmt.Printf("SpMM after RCM    %8.2f GB/s compulsory bytes (%.0f%% of triad)\n", r.SpMMRCMGBs, 100*r.SpMMRCMOfTriad)
	fmt.Printf("GEMM n×128·128×16 %7.2f GFLOP/s\n", r.GEMMGflops)
	fmt.Printf("\nGEMM (%d rows; OpenBLAS sgemm on the same matrices and threads)\n%-22s %9s %9s %11s %9s %13s\n", ds.N, "shape", "ms", "GFLOP/s", "OpenBLAS ms", "of OpenBLAS", "+dropout ms")
	for _, g := range r.GEMMTable {
		fmt.Printf("%-22s %9.2f %9.1f %11.2f %9.0f%% %13.2f\n", g.Shape, g.Ms, g.GFlops, g.OpenBLASMs, 100*g.OfOpenBLAS, g.MaskedMs)
	}
	fmt.Printf("\nSpMM Â·H against the triad (%.1f GB/s); ceiling: the compulsory bytes' share of the triad\nif every gathered row came at the rate an array the size of H is read in order; gathers: the\nproduct's gathers alone (no values, no products), taking turns with it, and their share of the triad;\nin L2: the product with every gathered row in L2 (H folded into 256 KB), and the same share\n", r.TriadGBs)
	fmt.Printf("%6s %9s %14s %9s %14s %14s %9s %11s %9s %9s %9s\n", "width", "ms", "GB/s compuls.", "of triad", "GB/s gathered", "GB/s seq. read", "ceiling", "gathers ms", "ceiling", "in L2 ms", "ceiling")
	for _, x := range r.SpMMTable {
		fmt.Printf("%6d %9.2f %14.2f %8.0f%% %14.2f %14.2f %8.0f%% %11.2f %8.0f%% %9.2f %8.0f%%\n", x.Width, x.Ms, x.GBs, 100*x.OfTriad, x.GatherGBs, x.SeqReadGBs, 100*x.CeilingOfTriad, x.GatherMs, 100*x.GatherCeilingOfTriad, x.InL2Ms, 100*x.InL2OfTriad)
	}
	if r.ReadAXGBs > 0 {
		fmt.Printf("\nsequential read   %8.2f GB/s of an array ÂX's size (%.0f MB), %.2f GB/s of a 2 GiB one\n",
			r.ReadAXGBs, float64(ds.N*128*4)/1e6, r.ReadLargeGBs)
	}
	fmt.Println()
	fmt.Printf("epoch (ÂX precomputed) %8.2f ms\n", r.EpochMs)
	fmt.Printf("epoch (plain Â(XW))    %8.2f ms\n", r.EpochPlainMs)
	fmt.Printf("epoch (ÂX, RCM order)  %8.2f ms\n", r.EpochRCMMs)
	return writeJSON(*out, r)
}

// spmmTable times Â·H at the widths a GNN uses. Compulsory bytes: Â once
// (value and column index), its row pointer, H and the output once each.
func spmmTable(ahat *matrix.CSR, triad float64, timed func(int, func()) time.Duration, be kernels.Backend) ([]SpMMRow, error) {
	var rows []SpMMRow
	var gatherErr error
	for _, w := range []int{16, 64, 128, 256} {
		h, out := be.NewDense(ahat.Cols, w), be.NewDense(ahat.Rows, w)
		for i := range h.Data {
			h.Data[i] = float32(i%7) * 0.1
		}
		be.Upload(h)
		bytes := float64(ahat.NNZ())*8 + float64(ahat.Rows+1)*8 + float64(ahat.Cols*w+ahat.Rows*w)*4
		gathered := float64(ahat.NNZ())*(8+4*float64(w)) + float64(ahat.Rows*w)*4
		ofTriad := func(d time.Duration) float64 { return bytes / d.Seconds() / 1e9 / triad }
		var x SpMMRow
		var d time.Duration
		if be.Name() == "cpu" { // the three take turns, 20 times as the head line, so a slow phase hits all
			inL2, hL2 := foldColumns(ahat, (256<<10)/(4*w)), be.NewDense((256<<10)/(4*w), w)
			t := takeTurns(20, timed, []func(){
				func() { be.SpMM(out, ahat, h, false) },
				func() {
					if err := kernels.GatherSum(out, ahat, h); err != nil {
						gatherErr = err
					}
				},
				func() { be.SpMM(out, inL2, hL2, false) },
			})
			d = t[0]
			x.GatherMs, x.GatherCeilingOfTriad = ms(t[1]), ofTriad(t[1])
			x.InL2Ms, x.InL2OfTriad = ms(t[2]), ofTriad(t[2])
		} else {
			d = timed(5, func() { be.SpMM(out, ahat, h, false) })
		}
		x.Width, x.Ms, x.GBs, x.OfTriad = w, ms(d), bytes/d.Seconds()/1e9, ofTriad(d)
		x.GatherGBs = gathered / d.Seconds() / 1e9
		rows = append(rows, x)
	}
	return rows, gatherErr
}

// foldColumns returns a copy of a whose column indices are taken modulo
// rows: the same rows, values and loop, gathering from an H of that many
// rows. (Its columns are no longer sorted or unique; the kernel does not
// need them to be.)
func foldColumns(a *matrix.CSR, rows int) *matrix.CSR {
	f := &matrix.CSR{Rows: a.Rows, Cols: rows, RowPtr: a.RowPtr, Val: a.Val, ColIdx: make([]int32, len(a.ColIdx))}
	for i, c := range a.ColIdx {
		f.ColIdx[i] = c % int32(rows)
	}
	return f
}

// readRate is the best rate, over 10 timings, at which the CPU reads an
// array of n floats in order (small arrays read several times per timing).
func readRate(n int) float64 {
	x := make([]float32, n)
	for i := range x { // untouched pages would all read the one zero page
		x[i] = 1
	}
	reps := max(1, (256<<20)/(4*n))
	d := best(10, func() { kernels.SumRepeated(x, reps) })
	return float64(4*n*reps) / d.Seconds() / 1e9
}

// gemmTable times the GEMM shapes of a GNN over n rows at widths 16 to 256:
// the first layer n×128·128×w and its weight gradient (n×128)ᵀ·(n×w), and a
// hidden layer n×w·w×w, each next to OpenBLAS on the same matrices.
func gemmTable(n int, timed func(int, func()) time.Duration, be kernels.Backend) ([]GEMMRow, error) {
	fill := func(d *matrix.Dense) *matrix.Dense {
		for i := range d.Data {
			d.Data[i] = float32(i%13)*0.01 - 0.05
		}
		be.Upload(d)
		return d
	}
	onCPU := be.Name() == "cpu"
	var rows []GEMMRow
	for _, w := range []int{16, 64, 128, 256} {
		x, h := fill(be.NewDense(n, 128)), fill(be.NewDense(n, w))
		for _, sh := range []struct {
			name    string
			a, b, c *matrix.Dense
			tn      bool
		}{
			{fmt.Sprintf("n×128 · 128×%d", w), x, fill(be.NewDense(128, w)), be.NewDense(n, w), false},
			{fmt.Sprintf("(n×128)ᵀ · n×%d", w), x, h, be.NewDense(128, w), true},
			{fmt.Sprintf("n×%d · %d×%d", w, w, w), h, fill(be.NewDense(w, w)), be.NewDense(n, w), false},
		} {
			var kerr, berr error
			mul := func(m matrix.Mask) {
				switch {
				case !onCPU && sh.tn: // a device's products, which draw no dropout inside
					kerr = be.GEMMTN(sh.c, sh.a, sh.b)
				case !onCPU:
					kerr = be.GEMM(sh.c, sh.a, sh.b, false)
				case sh.tn:
					kerr = kernels.GEMMTNDrop(sh.c, sh.a, sh.b, m)
				default:
					kerr = kernels.GEMMDrop(sh.c, sh.a, sh.b, m, false)
				}
			}
			runs := []func(){func() { mul(matrix.Mask{}) }, nil, nil}
			if sh.a == x && onCPU {
				runs[1] = func() { mul(matrix.Mask{P: 0.5, Seed: 1, Stream: 2}) }
			}
			if blasGEMM != nil {
				runs[2] = func() { berr = blasGEMM(sh.c, sh.a, sh.b, sh.tn) }
			}
			d := takeTurns(20, timed, runs) // as many turns as the SpMM table's
			if err := errors.Join(kerr, berr, be.Err()); err != nil {
				return nil, fmt.Errorf("gemm %s: %w", sh.name, err)
			}
			flops := 2 * float64(sh.a.Rows) * float64(sh.a.Cols) * float64(sh.b.Cols)
			row := GEMMRow{Shape: sh.name, Ms: ms(d[0]), GFlops: flops / d[0].Seconds() / 1e9, MaskedMs: ms(d[1]), OpenBLASMs: ms(d[2])}
			if blasGEMM != nil {
				row.OfOpenBLAS = row.OpenBLASMs / row.Ms
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// takeTurns times each of runs (nil: skipped, 0) once per round, for
// rounds rounds, and keeps each one's best: the figures set side by side
// take turns, so a slow phase of the machine (these VMs swing by up to 50%
// for seconds at a time) hits all of them alike.
func takeTurns(rounds int, timed func(int, func()) time.Duration, runs []func()) []time.Duration {
	d := make([]time.Duration, len(runs))
	for range rounds {
		for i, f := range runs {
			if f != nil {
				if t := timed(1, f); d[i] == 0 || t < d[i] {
					d[i] = t
				}
			}
		}
	}
	return d
}

// timedBackend is what the benchmark needs beyond kernels.Backend: the
// triad, a wait for queued work, and the device's name.
type timedBackend interface {
	Triad(a, b, c *matrix.Dense, s float32)
	Sync() error
	Device() string
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// writeJSON writes v to path, where one is given: a benchmark run by hand
// only prints, so it never leaves files in the checkout it runs from.
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(path, append(b, '\n')); err != nil {
		return err
	}
	fmt.Printf("results: %s\n", path)
	return nil
}

// CommRow is one message size of `sancus bench comm`.
type CommRow struct {
	Bytes            int     `json:"bytes"`
	RingBcastGBs     float64 `json:"ring_bcast_gb_s"`
	NativeBcastGBs   float64 `json:"mpi_bcast_gb_s"`
	RingAllreduceGBs float64 `json:"ring_allreduce_gb_s"`
	NativeAllredGBs  float64 `json:"mpi_allreduce_gb_s"`
	InprocBcastGBs   float64 `json:"inproc_ring_bcast_gb_s"`
	InprocAllredGBs  float64 `json:"inproc_ring_allreduce_gb_s"`
}

// benchComm measures broadcast and allreduce bandwidth (message bytes per
// second as seen by one rank) over MPI and the in-process transport.
func benchComm(args []string) error {
	fs := newFlags("bench comm", "bench comm [--out FILE]   (run under mpirun -np P)")
	out := fs.String("out", "", "rank 0 also writes the table as JSON to `FILE` (make bench-comm: results/bench/comm-P<P>.json)")
	maxMiB := fs.Int("max-mib", 64, "largest message in MiB")
	chunk := fs.Int("chunk", 0, "ring chunk in floats (0: default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := outFile(*out, "the table's JSON file", "comm.json"); err != nil {
		return err
	}
	env, err := launch.Detect()
	if err != nil {
		return err
	}
	var c collectives.Comm
	if env.Parallel() {
		launch.PrepareMPI(runtime.NumCPU())
		m, err := mpi.Start(2 * time.Minute)
		if err != nil {
			return err
		}
		defer m.Close()
		c = m
	}
	var rows []CommRow
	for size := 4 << 10; size <= *maxMiB<<20; size *= 4 {
		n := size / 4
		buf := make([]float32, n)
		reps := max(3, min(50, (64<<20)/size))
		row := CommRow{Bytes: size}
		gbs := func(d time.Duration) float64 { return float64(size) / d.Seconds() / 1e9 }
		if c != nil && c.Size() > 1 {
			timed := func(f func() error) (float64, error) {
				var ferr error
				d := best(reps, func() {
					c.Barrier()
					if err := f(); err != nil && ferr == nil {
						ferr = err
					}
				})
				// The slowest rank decides when a collective is done.
				all, err := collectives.Allgather(c, []float64{d.Seconds()})
				if err != nil {
					return 0, err
				}
				sort.Slice(all, func(i, j int) bool { return all[i] > all[j] })
				return gbs(time.Duration(float64(all[0]) * 1e9)), ferr
			}
			var errs [4]error
			row.RingBcastGBs, errs[0] = timed(func() error { return collectives.RingBcast(c, buf, 0, *chunk) })
			row.NativeBcastGBs, errs[1] = timed(func() error { return collectives.Bcast(c, buf, 0) })
			row.RingAllreduceGBs, errs[2] = timed(func() error { return collectives.RingAllreduce(c, buf) })
			row.NativeAllredGBs, errs[3] = timed(func() error { return c.Allreduce(buf) })
			for _, e := range errs {
				if e != nil {
					c.Abort(e)
				}
			}
		}
		p := 2
		if c != nil {
			p = max(2, c.Size())
		}
		if c == nil || c.Rank() == 0 {
			row.InprocBcastGBs = gbs(inprocTime(p, n, reps, func(cc collectives.Comm, b []float32) error { return collectives.RingBcast(cc, b, 0, *chunk) }))
			row.InprocAllredGBs = gbs(inprocTime(p, n, reps, func(cc collectives.Comm, b []float32) error { return collectives.RingAllreduce(cc, b) }))
		}
		rows = append(rows, row)
	}
	var small *SmallMessages
	if c != nil && c.Size() > 1 {
		if small, err = smallMessages(c); err != nil {
			c.Abort(err)
		}
	}
	if c != nil && c.Rank() != 0 {
		return nil
	}
	ranks := 1
	if c != nil {
		ranks = c.Size()
	}
	if small != nil {
		fmt.Printf("%d messages of %d bytes a rank, every peer at once: %.2f µs a message one by one, %.2f µs batched (one hand-off to MPI's thread per batch)\n",
			small.Messages, small.Bytes, small.OneByOneUs, small.BatchedUs)
	}
	fmt.Printf("GB/s by message size, %d MPI rank(s); in-process with %d goroutine ranks\n", ranks, max(2, ranks))
	fmt.Printf("%10s %11s %11s %11s %11s %11s %11s\n", "bytes", "ring bcast", "MPI_Bcast", "ring allred", "MPI_Allred", "inproc bc", "inproc ar")
	for _, r := range rows {
		fmt.Printf("%10d %11.3f %11.3f %11.3f %11.3f %11.3f %11.3f\n", r.Bytes, r.RingBcastGBs, r.NativeBcastGBs, r.RingAllreduceGBs, r.NativeAllredGBs, r.InprocBcastGBs, r.InprocAllredGBs)
	}
	return writeJSON(*out, map[string]any{"ranks": ranks, "rows": rows, "small_messages": small})
}

// SmallMessages is the cost of a message where messages are many and small,
// as a sparse exchange's are at hundreds of ranks: each rank sends every
// peer 16 messages of 64 bytes and receives as many, posted and waited for
// one by one, and in batches (collectives.Start, WaitAllOn). µs a message
// sent or received, the slowest rank's, best of 20.
type SmallMessages struct {
	Messages   int     `json:"messages"` // a rank's, sent and received
	Bytes      int     `json:"bytes"`
	OneByOneUs float64 `json:"one_by_one_us"`
	BatchedUs  float64 `json:"batched_us"`
}

func smallMessages(c collectives.Comm) (*SmallMessages, error) {
	const k, size, reps = 16, 64, 20
	me, p := c.Rank(), c.Size()
	var ts []collectives.Transfer
	for peer := range p {
		if peer == me {
			continue
		}
		for range k {
			ts = append(ts, collectives.Transfer{Buf: make([]byte, size), Peer: peer, Tag: collectives.TagUser + 11, Recv: true})
		}
	}
	for peer := range p {
		if peer == me {
			continue
		}
		for range k {
			ts = append(ts, collectives.Transfer{Buf: make([]byte, size), Peer: peer, Tag: collectives.TagUser + 11})
		}
	}
	reqs := make([]collectives.Request, len(ts))
	oneByOne := func() error {
		// c with its Comm methods alone: no batches, a hand-off a message.
		if err := collectives.Start(struct{ collectives.Comm }{c}, ts, reqs); err != nil {
			return err
		}
		return collectives.WaitAll(reqs)
	}
	batched := func() error {
		if err := collectives.Start(c, ts, reqs); err != nil {
			return err
		}
		return collectives.WaitAllOn(c, reqs)
	}
	r := &SmallMessages{Messages: len(ts), Bytes: size}
	// Taking turns, so that a slow phase of the machine hits both.
	var d [2]time.Duration
	for i := range 2 * reps {
		var ferr error
		f := []func() error{oneByOne, batched}[i%2]
		t := best(1, func() {
			if err := c.Barrier(); err != nil {
				ferr = err
			}
			if err := f(); err != nil && ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		if d[i%2] == 0 || t < d[i%2] {
			d[i%2] = t
		}
	}
	all, err := collectives.Allgather(c, []float64{d[0].Seconds(), d[1].Seconds()})
	if err != nil {
		return nil, err
	}
	for q := 0; q < len(all); q += 2 {
		r.OneByOneUs = max(r.OneByOneUs, all[q]*1e6/float64(len(ts)))
		r.BatchedUs = max(r.BatchedUs, all[q+1]*1e6/float64(len(ts)))
	}
	return r, nil
}

func inprocTime(p, n, reps int, op func(c collectives.Comm, b []float32) error) time.Duration {
	w := collectives.NewWorld(p, time.Minute)
	times := make([]time.Duration, p)
	w.Run(func(c collectives.Comm) error {
		b := make([]float32, n)
		times[c.Rank()] = best(reps, func() {
			c.Barrier()
			op(c, b)
		})
		return nil
	})
	return slices_max(times)
}

func slices_max(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// appendJSONLine appends v as one JSON line (a log of benchmark rows).
func appendJSONLine(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

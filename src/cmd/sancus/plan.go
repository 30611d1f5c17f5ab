package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/src/atomicfile"
	"sancus/src/graph"
	"sancus/src/model"
	"sancus/src/prepare"
	"sancus/src/scaling"
	"sancus/src/shard"
	"sancus/src/train"
)

// modelFlags are the model choices plan and bench rank share with train.
type modelFlags struct {
	arch                  model.Arch
	hidden, layers, heads int
	wire                  wire.Format
	fullOutput, cacheBits bool
}

func addModelFlags(fs *pflag.FlagSet) *modelFlags {
	d := train.Defaults()
	m := &modelFlags{arch: d.Model.Arch, wire: wire.FP32}
	fs.Var(&m.arch, "model", "gcn, sage or gat")
	fs.IntVar(&m.hidden, "hidden", d.Model.Hidden, "hidden width (GAT: per head)")
	fs.IntVar(&m.layers, "layers", d.Model.Layers, "layers")
	fs.IntVar(&m.heads, "heads", d.Model.Heads, "GAT: attention heads of the hidden layers")
	fs.Var(&m.wire, "wire", "how rows travel: fp32, bf16, int8, int4 or int2")
	fs.BoolVar(&m.fullOutput, "full-output", false, "compute (and send) every row of the last layer in training, as train --full-output")
	fs.BoolVar(&m.cacheBits, "cache-bits", false, "keep the caches in --wire's bits, as train --cache-bits (the memory estimate)")
	return m
}

func (m *modelFlags) config() train.Config {
	c := train.Defaults()
	c.Model.Arch, c.Model.Hidden, c.Model.Layers, c.Model.Heads = m.arch, m.hidden, m.layers, m.heads
	c.Wire.Fwd, c.Exchange.FullOutput, c.Wire.CacheBits = m.wire, m.fullOutput, m.cacheBits
	return c
}

// planOut is what plan writes with --out.
type planOut struct {
	Command   string          `json:"command"`
	Data      string          `json:"data"`
	Nodes     int             `json:"graph_nodes"`
	Model     string          `json:"model"`
	Cluster   scaling.Cluster `json:"cluster"`
	Rates     scaling.Rates   `json:"rates"`
	RatesFrom string          `json:"rates_from"`
	// Calibration: with --calibrate, every replayed rank, those fitted and
	// those (--validate-ranks) only checked against the fit.
	Calibration *calibration         `json:"calibration,omitempty"`
	Rows        []scaling.Prediction `json:"rows"`
	Recommend   string               `json:"recommendation"`
}

func runPlan(args []string) error {
	fs := newFlags("plan", "plan --data DIR [--model gcn --hidden 16 --layers 2] --nodes N --ranks-per-node K --link-gbs G --latency-us L (--calibrate | --spmm-gflops S --gemm-gflops G) [--out FILE.json|.tsv]")
	data := fs.String("data", "", "dataset directory (required)")
	mf := addModelFlags(fs)
	pf := addPartitionFlags(fs)
	var cl scaling.Cluster
	fs.IntVar(&cl.Nodes, "nodes", 1, "nodes the job may use")
	fs.IntVar(&cl.RanksPerNode, "ranks-per-node", 1, "ranks on a node")
	fs.IntVar(&cl.CoresPerNode, "cores-per-node", 0, "cores a node has (0: one a rank); more ranks than cores multiplies compute by ranks/cores")
	fs.IntVar(&cl.HostCores, "host-cores", 0, "every node is one host with this many cores (emulated nodes): more ranks, all nodes' together, than cores multiplies compute by ranks/cores")
	fs.Float64Var(&cl.LinkGBs, "link-gbs", 12.5, "each node's network bandwidth, GB/s each way (12.5: 100 Gb/s)")
	fs.Float64Var(&cl.LatencyUs, "latency-us", 2, "latency a message, µs")
	var rates scaling.Rates
	fs.Float64Var(&rates.SpMMGflops, "spmm-gflops", 0, "one rank's sparse-product rate on one core, GFLOP/s (or --calibrate)")
	fs.Float64Var(&rates.GEMMGflops, "gemm-gflops", 0, "one rank's GEMM rate on one core, GFLOP/s (or --calibrate)")
	fs.Float64Var(&rates.BlockUs, "block-us", 0, "what each peer's block costs a rank beyond its flops, µs (or --calibrate)")
	calibrate := fs.Bool("calibrate", false, "measure the rates here: replay the busiest rank (bench rank) at --calibrate-ranks and fit them")
	fs.Float64Var(&rates.PassNs, "pass-ns", 0, "what each value of a row a peer block's product passes over costs, ns (or --calibrate)")
	fs.Float64Var(&rates.ByteNs, "byte-ns", 0, "what each byte of rows packed to send or taken in costs, ns (or --calibrate)")
	calRanks := fs.IntSlice("calibrate-ranks", []int{4, 16, 64}, "with --calibrate: the P to replay at and fit (three or more fit a cost a peer block; five or more can fit a row value's and a byte's too)")
	valRanks := fs.IntSlice("validate-ranks", nil, "with --calibrate: also replay at these P, not fitted, and compare them with the fit's prediction")
	rounds := fs.Int("calibrate-rounds", 10, "with --calibrate: steps replayed at each P, one P after the other in turn so that all share the machine's load; the least is fitted")
	maxRanks := fs.Int("max-ranks", 4096, "the largest P predicted (powers of two up to it)")
	out := fs.String("out", "", "also write the table to `FILE`: tab-separated if it ends in .tsv, else JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *data == "" {
		return fmt.Errorf("--data DIR is required: the graph to plan for")
	}
	if err := outFile(*out, "the table's file (.json or .tsv)", "plan.json"); err != nil {
		return err
	}
	if err := cl.Check(); err != nil {
		return err
	}
	if !*calibrate && (rates.SpMMGflops <= 0 || rates.GEMMGflops <= 0) {
		return fmt.Errorf("give the compute rates: --calibrate to measure them here, or --spmm-gflops and --gemm-gflops")
	}
	ds, err := graph.Load(*data, graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		return err
	}
	cfg := mf.config()
	g := scaling.GraphOf(ds)
	partOf := func(p int) (scaling.Partition, error) {
		if !pf.kind.Reorders() {
			return scaling.Contiguous(g, p)
		}
		parts, _, err := pf.run(*data, p)
		return scaling.Partition{P: p, Parts: parts}, err
	}
	res := planOut{Command: "sancus " + strings.Join(append([]string{"plan"}, args...), " "), Data: *data, Nodes: ds.N, Model: mf.arch.String(), Cluster: cl, Rates: rates, RatesFrom: "given"}
	if *calibrate {
		if res.Calibration, err = calibrateRates(ds, cfg, partOf, *calRanks, *valRanks, *rounds); err != nil {
			return err
		}
		res.Rates = res.Calibration.Rates
		res.RatesFrom = fmt.Sprintf("calibrated here at P = %v, one kernel thread, the least of %d steps", *calRanks, *rounds)
	}
	if res.Rates.OneRate {
		fmt.Printf("rates: %.2f GFLOP/s for sparse products and GEMMs alike (the replayed ranks' sparse and dense flops kept one ratio, or one kind was missing, so no fit could tell their rates apart; --spmm-gflops and --gemm-gflops without --calibrate set them), %.2f µs a peer block, %.2f ns a row value passed, %.3f ns a byte packed, a rank (%s)\n", res.Rates.GEMMGflops, res.Rates.BlockUs, res.Rates.PassNs, res.Rates.ByteNs, res.RatesFrom)
	} else {
		fmt.Printf("rates: sparse products %.2f GFLOP/s, GEMM %.2f GFLOP/s, %.2f µs a peer block, %.2f ns a row value passed, %.3f ns a byte packed, a rank (%s)\n", res.Rates.SpMMGflops, res.Rates.GEMMGflops, res.Rates.BlockUs, res.Rates.PassNs, res.Rates.ByteNs, res.RatesFrom)
	}
	if sh := cl.Share(); sh > 1 && cl.HostCores > 0 {
		fmt.Printf("%d ranks share the host's %d cores (every node's ranks on one host): compute is multiplied by ranks/cores, %.2f at P = %d\n", cl.Nodes*cl.RanksPerNode, cl.HostCores, sh, cl.Nodes*cl.RanksPerNode)
	} else if sh > 1 {
		fmt.Printf("%d ranks share %d cores on a node: compute is multiplied by %.2f\n", cl.RanksPerNode, cl.CoresPerNode, sh)
	}
	top := min(*maxRanks, cl.Nodes*cl.RanksPerNode, ds.N)
	wires := []wire.Format{mf.wire, wire.FP32, wire.BF16, wire.Format(8)}
	var best *scaling.Prediction
	var all []scaling.Prediction
	start := time.Now()
	for p := 1; p <= top; p *= 2 {
		part, err := partOf(p)
		if err != nil {
			return err
		}
		counts, err := scaling.Count(g, part, cl.RanksPerNode)
		if err != nil {
			return err
		}
		seen := map[wire.Format]bool{}
		for k, w := range wires {
			if seen[w] {
				continue
			}
			seen[w] = true
			c := cfg
			c.Wire.Fwd, c.Wire.CacheBits = w, cfg.Wire.CacheBits && w.Quantized()
			m, err := shapeOf(c, ds)
			if err != nil {
				return err
			}
			m.Memory = memoryInputs(c, ds, pf.kind.Reorders())
			pr := scaling.Predict(counts, m, cl, res.Rates)
			pr.Wire = w
			if k == 0 {
				res.Rows = append(res.Rows, pr)
			}
			all = append(all, pr)
		}
	}
	best = recommend(all)
	printPlan(os.Stdout, res.Rows)
	res.Recommend = why(best, all)
	fmt.Printf("recommended: %s\n", res.Recommend)
	fmt.Fprintf(os.Stderr, "counted %d partitions in %.1f s\n", len(res.Rows), time.Since(start).Seconds())
	if *out != "" {
		return writePlan(*out, res)
	}
	return nil
}

// shapeOf is cfg's model on ds as the cost model reads it.
func shapeOf(cfg train.Config, ds *graph.Dataset) (scaling.Model, error) {
	flows, err := cfg.Flows(ds.Features.Cols, ds.Classes)
	if err != nil {
		return scaling.Model{}, err
	}
	params, err := cfg.ParamCount(ds.Features.Cols, ds.Classes)
	if err != nil {
		return scaling.Model{}, err
	}
	dims := []int{ds.Features.Cols}
	for l := 0; l+1 < cfg.Model.Layers; l++ {
		h := cfg.Model.Hidden
		if cfg.Model.Arch.Attends() {
			h *= cfg.Model.Heads
		}
		dims = append(dims, h)
	}
	return scaling.Model{Dims: append(dims, ds.Classes), Flows: flows, Params: params, Allreduce: cfg.Wire.Allreduce}, nil
}

// memoryInputs is what the memory estimate reads of ds beyond the
// partition's counts. The precomputed product's nonzeros a row are those
// of the sum of a row's deg+1 rows of X, each of XPerRow ones placed at
// random among the columns.
func memoryInputs(cfg train.Config, ds *graph.Dataset, reordered bool) *scaling.MemoryInputs {
	n, f := ds.N, ds.Features.Cols
	// As prepare's default: ÂX and D⁻¹AX stored, whichever the model reads.
	in := &scaling.MemoryInputs{Config: cfg, Features: f, Classes: ds.Classes, N: int64(n), Reordered: reordered, Precomputed: true}
	in.GlobalTrain = int64(len(ds.Train))
	if n > 0 && f > 0 {
		in.XPerRow = float64(ds.Features.NNZ()) / float64(n)
		deg := float64(ds.Adj.NNZ())/float64(n) + 1
		in.ProductPerRow = float64(f) * (1 - math.Pow(1-in.XPerRow/float64(f), deg))
	}
	return in
}

// recommend is the configuration to run: the fewest ranks within 5% of
// the fastest epoch, fp32 unless a narrower wire saves over 10% there.
func recommend(all []scaling.Prediction) *scaling.Prediction {
	fastest := all[0].EpochMs
	for _, pr := range all {
		fastest = min(fastest, pr.EpochMs)
	}
	var best *scaling.Prediction
	for i := range all {
		pr := &all[i]
		if pr.EpochMs > 1.05*fastest {
			continue
		}
		if best == nil || pr.P < best.P {
			best = pr
		}
	}
	for i := range all { // at that P: fp32 unless a narrower wire saves over 10%
		pr := &all[i]
		if pr.P == best.P && pr.Wire == wire.FP32 && best.EpochMs > 0.9*pr.EpochMs {
			best = pr
		}
	}
	return best
}

// why says in one line why best was chosen.
func why(best *scaling.Prediction, all []scaling.Prediction) string {
	fastest := best
	for i := range all {
		if all[i].EpochMs < fastest.EpochMs {
			fastest = &all[i]
		}
	}
	s := fmt.Sprintf("P = %d on %d node(s), --wire %v: %.2f ms an epoch (compute %.2f, exposed communication %.2f)", best.P, best.Nodes, best.Wire, best.EpochMs, best.Compute, best.Exposed)
	switch {
	case fastest == best:
		s += ", the fastest"
	case fastest.P == best.P:
		s += fmt.Sprintf("; --wire %v would save %.0f%%, under the 10%% a narrower wire must save to be worth its rounding", fastest.Wire, 100*(1-fastest.EpochMs/best.EpochMs))
	default:
		s += fmt.Sprintf(", within %.0f%% of the fastest (P = %d, --wire %v, %.2f ms) on %d× fewer ranks", 100*(best.EpochMs/fastest.EpochMs-1), fastest.P, fastest.Wire, fastest.EpochMs, fastest.P/best.P)
	}
	return s
}

// printPlan prints the predictions; a rank's MB are what it sends and
// receives in an epoch (train's "sent" counts one direction), the busiest
// rank's and the mean.
func printPlan(w io.Writer, rows []scaling.Prediction) {
	fmt.Fprintf(w, "%6s %5s %5s %10s %10s %10s %10s %10s %10s %8s %10s %s\n", "P", "nodes", "wire", "epoch ms", "compute", "comm", "exposed", "MB in+out", "mean in+out", "msgs", "peak MB", "(graph own act caches eval exchange model working)")
	for _, r := range rows {
		exact := ""
		if !r.Exact {
			exact = " ~bytes"
		}
		fmt.Fprintf(w, "%6d %5d %5v %10.2f %10.2f %10.2f %10.2f %10.3f %10.3f %8d %10.1f (%.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f)%s\n", r.P, r.Nodes, r.Wire, r.EpochMs, r.Compute, r.Comm, r.Exposed, r.BytesMB, r.MeanMB, r.Messages, r.MemoryMB,
			r.Memory.Graph, r.Memory.Own, r.Memory.Activations, r.Memory.Caches, r.Memory.Eval, r.Memory.Exchange, r.Memory.Model, r.Memory.Working, exact)
	}
}

func writePlan(path string, res planOut) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		if strings.HasSuffix(path, ".tsv") {
			fmt.Fprintf(w, "# %s\n# rates %s: spmm %.3f gemm %.3f GFLOP/s, %.3f µs a peer block, %.3f ns a row value passed, %.4f ns a byte packed\n", res.Command, res.RatesFrom, res.Rates.SpMMGflops, res.Rates.GEMMGflops, res.Rates.BlockUs, res.Rates.PassNs, res.Rates.ByteNs)
			fmt.Fprintln(w, "ranks\tnodes\twire\tepoch_ms\tcompute_ms\tcomm_ms\texposed_ms\tmb_per_rank\tmean_mb_per_rank\tmessages_per_rank\tmemory_mb_per_rank\tbytes_exact\tgraph_mb\town_mb\tactivations_mb\tcaches_mb\teval_mb\texchange_mb\tmodel_mb\tworking_mb")
			for _, r := range res.Rows {
				m := r.Memory
				fmt.Fprintf(w, "%d\t%d\t%v\t%.3f\t%.3f\t%.3f\t%.3f\t%.4f\t%.4f\t%d\t%.2f\t%v\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", r.P, r.Nodes, r.Wire, r.EpochMs, r.Compute, r.Comm, r.Exposed, r.BytesMB, r.MeanMB, r.Messages, r.MemoryMB, r.Exact,
					m.Graph, m.Own, m.Activations, m.Caches, m.Eval, m.Exchange, m.Model, m.Working)
			}
			_, err := fmt.Fprintf(w, "# recommended: %s\n", res.Recommend)
			return err
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	})
}

// calibration is what --calibrate measured: the rates fitted and every
// rank replayed, with the machine's load while the replays ran.
type calibration struct {
	Rates  scaling.Rates `json:"rates"`
	Rounds int           `json:"rounds"`
	Points []calPoint    `json:"points"`
	// Load is the one-minute load average (/proc/loadavg) before the
	// first round and after each: the least and the most seen.
	LoadLeast float64 `json:"load_least"`
	LoadMost  float64 `json:"load_most"`
}

// calPoint is one replayed P: its busiest rank's work, its least and
// median step, and the fit's prediction.
type calPoint struct {
	P         int             `json:"ranks"`
	Fitted    bool            `json:"fitted"` // else only validated
	Rank      int             `json:"rank"`
	Rows      int             `json:"rows"`
	NNZ       int64           `json:"nnz"`
	Work      scaling.Work    `json:"work"`
	LeastMs   float64         `json:"least_ms"`
	MedianMs  float64         `json:"median_ms"`
	Predicted float64         `json:"predicted_ms"`
	Sent      int64           `json:"bytes_sent"` // a step, replayed
	Recv      int64           `json:"bytes_recv"`
	Counted   scaling.Traffic `json:"counted"` // what plan counts for the rank
	steps     []float64
}

// calibrateRates replays, at each P of fit and check, the rank with the
// most nonzeros: every replay is built first, then each steps once in
// turn, rounds times, so that the points fitted and those checked share
// whatever load the machine has. The rates are fitted to the least step
// of each P in fit (what other work adds is not the rank's).
func calibrateRates(ds *graph.Dataset, cfg train.Config, partOf func(int) (scaling.Partition, error), fit, check []int, rounds int) (*calibration, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("--calibrate-rounds must be ≥ 1, got %d", rounds)
	}
	g := scaling.GraphOf(ds)
	m, err := shapeOf(cfg, ds)
	if err != nil {
		return nil, err
	}
	defer kernels.SetThreads(kernels.Threads())
	kernels.SetThreads(1)
	// Each P's set-up makes every shard (P² blocks) to keep a column of
	// them: collected sooner, the garbage does not double what the
	// replays hold.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	cal := &calibration{Rounds: rounds}
	var reps []*train.Replay
	defer func() {
		for _, rp := range reps {
			rp.Close()
		}
	}()
	seen := map[int]bool{}
	for k, p := range append(append([]int{}, fit...), check...) {
		flag := "--calibrate-ranks"
		if k >= len(fit) {
			flag = "--validate-ranks"
		}
		if p < 1 || p > ds.N || seen[p] {
			return nil, fmt.Errorf("%s: %d is not a rank count for %d nodes, or is given twice", flag, p, ds.N)
		}
		seen[p] = true
		part, err := partOf(p)
		if err != nil {
			return nil, err
		}
		counts, err := scaling.Count(g, part, 0)
		if err != nil {
			return nil, err
		}
		r, err := busiest(g, part)
		if err != nil {
			return nil, err
		}
		rp, rb, err := buildReplay(ds, part, cfg, r)
		if err != nil {
			return nil, err
		}
		reps = append(reps, rp)
		// The preparation's every shard (P² blocks) is garbage now: given
		// back before the next P's, the replays' memory is what stays.
		debug.FreeOSMemory()
		if _, err := rp.Epochs(1); err != nil { // the warm-up
			return nil, err
		}
		t := scaling.RankTraffic(counts, r, m.Flows, m.Params, m.Allreduce)
		cal.Points = append(cal.Points, calPoint{P: p, Fitted: k < len(fit), Rank: r, Rows: rb.Rows, NNZ: rb.NNZ, Work: m.WorkMoving(counts.Ranks[r], t), Counted: t})
		fmt.Fprintf(os.Stderr, "calibrate: P = %d rank %d set up\n", p, r)
	}
	cal.LoadLeast, cal.LoadMost = math.Inf(1), 0
	noteLoad := func() {
		if l, ok := loadAverage(); ok {
			cal.LoadLeast, cal.LoadMost = min(cal.LoadLeast, l), max(cal.LoadMost, l)
		}
	}
	noteLoad()
	for range rounds {
		for k, rp := range reps {
			eps, err := rp.Epochs(1)
			if err != nil {
				return nil, err
			}
			pt := &cal.Points[k]
			pt.steps = append(pt.steps, eps[0].Ms)
			pt.Sent, pt.Recv = eps[0].Sent, eps[0].Recv
		}
		noteLoad()
	}
	if math.IsInf(cal.LoadLeast, 1) {
		cal.LoadLeast = 0
	}
	var samples []scaling.Sample
	for k := range cal.Points {
		pt := &cal.Points[k]
		pt.LeastMs, pt.MedianMs = slices.Min(pt.steps), median(pt.steps)
		if pt.Fitted {
			samples = append(samples, scaling.Sample{Work: pt.Work, Seconds: pt.LeastMs / 1e3})
		}
	}
	cal.Rates, err = scaling.Fit(samples)
	for k := range cal.Points {
		pt := &cal.Points[k]
		pt.Predicted = pt.Work.Seconds(cal.Rates) * 1e3
		role := "fitted"
		if !pt.Fitted {
			role = "checked"
		}
		fmt.Fprintf(os.Stderr, "calibrate: P = %d rank %d (%s): least %.2f ms, median %.2f ms of %d steps; predicted %.2f ms (least/predicted %.2f) for %.4f GFLOP sparse, %.4f GFLOP dense, %.0f peer blocks, %.0f row values passed\n",
			pt.P, pt.Rank, role, pt.LeastMs, pt.MedianMs, rounds, pt.Predicted, pt.LeastMs/pt.Predicted, pt.Work.SpMM/1e9, pt.Work.GEMM/1e9, pt.Work.Blocks, pt.Work.PassedValues)
	}
	fmt.Fprintf(os.Stderr, "calibrate: load average %.2f to %.2f while the rounds ran\n", cal.LoadLeast, cal.LoadMost)
	return cal, err
}

// loadAverage is the machine's one-minute load average, where it has one.
func loadAverage() (float64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	var l float64
	_, err = fmt.Sscan(string(b), &l)
	return l, err == nil
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rankBench is what bench rank reports of one replayed rank.
type rankBench struct {
	Command   string    `json:"command"`
	Data      string    `json:"data"`
	Ranks     int       `json:"ranks"`
	Rank      int       `json:"rank"`
	Rows      int       `json:"rows"`
	NNZ       int64     `json:"nnz"`
	Epochs    []float64 `json:"epoch_ms"`   // every replayed step, the first a warm-up
	ComputeMs float64   `json:"compute_ms"` // mean of the steps after the first
	MinMs     float64   `json:"min_ms"`
	MedianMs  float64   `json:"median_ms"`
	BytesSent int64     `json:"bytes_sent"` // an epoch
	BytesRecv int64     `json:"bytes_recv"`
	// Counted is what plan counts for the rank from the partition, and
	// PredictedMs its compute at the rates given (with --data).
	Counted     *scaling.Traffic `json:"counted,omitempty"`
	PredictedMs float64          `json:"predicted_compute_ms,omitempty"`
}

// replayRank prepares ds's partition in memory and replays rank r for
// epochs steps.
func replayRank(ds *graph.Dataset, part scaling.Partition, cfg train.Config, r, epochs int) (rankBench, error) {
	prep, err := prepareInMemory(ds, part, cfg)
	if err != nil {
		return rankBench{}, err
	}
	return replayShards(prep.Shard, part.P, cfg, r, epochs)
}

// buildReplay prepares ds's partition in memory and builds rank r's
// replay, keeping none of the other shards.
func buildReplay(ds *graph.Dataset, part scaling.Partition, cfg train.Config, r int) (*train.Replay, rankBench, error) {
	prep, err := prepareInMemory(ds, part, cfg)
	if err != nil {
		return nil, rankBench{}, err
	}
	return newReplay(prep.Shard, part.P, cfg, r)
}

func prepareInMemory(ds *graph.Dataset, part scaling.Partition, cfg train.Config) (*prepare.Prepared, error) {
	opt := prepare.Options{Precompute: train.Precomputable(cfg.Model.Arch)}
	if !isContiguous(part) {
		opt.Parts = part.Parts
	}
	return prepare.InMemory(ds, part.P, opt)
}

func isContiguous(part scaling.Partition) bool {
	for v := 1; v < len(part.Parts); v++ {
		if part.Parts[v] < part.Parts[v-1] {
			return false
		}
	}
	return true
}

// replayShards replays rank r of p, loading shards through load, for
// epochs steps on one kernel thread: Rates are one core's
// (Cluster.ShareAt divides cores among ranks); replayed on all of this
// machine's kernel threads, a rank would be timed on every core and the
// shared cores counted twice.
func replayShards(load func(int) (*shard.Shard, error), p int, cfg train.Config, r, epochs int) (rankBench, error) {
	if epochs < 2 {
		return rankBench{}, fmt.Errorf("--epochs must be ≥ 2 (the first is a warm-up), got %d", epochs)
	}
	defer kernels.SetThreads(kernels.Threads())
	kernels.SetThreads(1)
	rp, rb, err := newReplay(load, p, cfg, r)
	if err != nil {
		return rb, err
	}
	defer rp.Close()
	eps, err := rp.Epochs(epochs)
	if err != nil {
		return rb, err
	}
	for _, ep := range eps {
		rb.Epochs = append(rb.Epochs, ep.Ms)
	}
	rb.MinMs, rb.MedianMs = slices.Min(rb.Epochs[1:]), median(rb.Epochs[1:])
	for _, ms := range rb.Epochs[1:] {
		rb.ComputeMs += ms / float64(epochs-1)
	}
	rb.BytesSent, rb.BytesRecv = eps[len(eps)-1].Sent, eps[len(eps)-1].Recv
	return rb, nil
}

// newReplay builds rank r of p's replay, loading shards through load.
func newReplay(load func(int) (*shard.Shard, error), p int, cfg train.Config, r int) (*train.Replay, rankBench, error) {
	own, peers, err := scaling.ReplaySetup(load, p, r)
	if err != nil {
		return nil, rankBench{}, err
	}
	rb := rankBench{Ranks: p, Rank: r, Rows: own.Rows()}
	for _, b := range own.Blocks {
		rb.NNZ += b.NNZ()
	}
	rp, err := train.NewReplay(cfg, own, peers)
	return rp, rb, err
}

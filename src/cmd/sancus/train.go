package main

import (
	"sancus/src/result"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"sancus/launch"
	"sancus/src/graph"
	"sancus/src/shard"
	"sancus/src/train"
)

type trainFlags struct {
	data, shards, out, name string
	ranks, threads          int
	mpiWait                 launch.Wait
	load                    graph.LoadOptions
	timeout                 time.Duration
	quiet                   bool
	saveWeights             string
	saveModel               string
	saveModelAt             weightsAt
	wireGiven               bool              // --wire or --wire-grad on the command line
	sampled                 train.BatchConfig // --fanouts, --batch-size, --batch-draw: given to the run with --batch sampled
}

func trainFlagSet(cfg *train.Config, tf *trainFlags) *pflag.FlagSet {
	g := newGrouped("train", "train (--data DIR | --shards DIR) [flags]",
		"mpirun -np 4 sancus train --shards data/g-P4 --staleness variation-gap --eps 0.03 --epochs 200")
	m, o, st, w := &cfg.Model, &cfg.Optim, &cfg.Staleness, &cfg.Wire
	b, x, r := &cfg.Batch, &cfg.Exchange, &cfg.Run

	fs := g.section("Data")
	fs.StringVar(&tf.data, "data", "", "dataset `DIR` or file (whole graph; every rank reads it)")
	fs.StringVar(&tf.shards, "shards", "", "shard `DIR` from 'sancus prepare' (each rank reads its own shard)")
	addLoadFlags(fs, &tf.load, " (with --data)")

	fs = g.section("Model")
	fs.Var(&m.Arch, "model", "gcn (Kipf and Welling), sage (GraphSAGE-mean: neighbour mean and a root weight) or gat (Veličković et al.: attention heads, ELU); sage and gat read X, not ÂX")
	fs.IntVar(&m.Layers, "layers", m.Layers, "graph convolution layers")
	fs.IntVar(&m.Hidden, "hidden", m.Hidden, "hidden width (a GAT's: per head)")
	fs.BoolVar(&m.Residual, "residual", false, "hidden layers of equal width add their input to their output (needs 3+ layers)")
	fs.IntVar(&m.Heads, "heads", m.Heads, "GAT: attention heads of the hidden layers (concatenated)")
	fs.IntVar(&m.OutHeads, "out-heads", m.OutHeads, "GAT: attention heads of the output layer (averaged)")
	fs.Float64Var(&m.Dropout, "dropout", m.Dropout, "dropout probability on every layer's input")
	fs.Float64Var(&m.AttDropout, "att-dropout", m.AttDropout, "GAT: dropout of attention coefficients (< 0: as --dropout)")
	fs.BoolVar(&m.Precompute, "precompute", m.Precompute, "layer 1 of a GCN reads precomputed ÂX, of GraphSAGE D⁻¹AX (layer 1 sends nothing; dropout falls on the product); --precompute=false runs the plain path")

	fs = g.section("Optimization")
	fs.IntVar(&o.Epochs, "epochs", o.Epochs, "training epochs")
	fs.Float64Var(&o.LR, "lr", o.LR, "Adam learning rate")
	fs.Float64Var(&o.WeightDecay, "weight-decay", o.WeightDecay, "L2 weight decay on the first layer (a GAT's: every parameter)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for weights and dropout")
	fs.Float64Var(&o.Clip, "clip", o.Clip, "per-rank gradient clipping threshold th (0: off)")
	fs.Float64Var(&o.ClipScale, "clip-scale", o.ClipScale, "th_i = clip-scale·th (0: √P, as in SANCUS)")
	fs.Float64Var(&o.MaxLossGrowth, "max-loss-growth", o.MaxLossGrowth, "stop as diverged when the loss exceeds this many times the first epoch's (0: only NaN/Inf stop)")

	fs = g.section("Staleness (which broadcasts a rank may skip)")
	fs.Var(&st.Policy, "staleness", "staleness policy: none, epoch-fixed, epoch-adaptive, variation-gap (or the papers' E, A, H)")
	fs.Float64Var(&st.Eps, "eps", st.Eps, "staleness bound: epochs (ε_E, ε_A; default 1) or relative change (ε_H; default 0.03)")
	fs.Lookup("eps").DefValue = "0" // the policy's own bound, which the text gives: not the -1 that stands for it
	fs.IntVar(&st.MaxStale, "max-stale", st.MaxStale, "hard cap on epochs a cached block may be reused, for every policy")
	fs.BoolVar(&st.SkipGradients, "skip-gradients", st.SkipGradients, "SkipG baseline: let the staleness policy skip gradient broadcasts too")
	fs.BoolVar(&st.FreshDiagonal, "fresh-diagonal", st.FreshDiagonal, "multiply a rank's own block with its fresh rows instead of the shared cached copy")

	fs = g.section("Wire (blocks in fewer bits)")
	fs.Var(&w.Fwd, "wire", "forward blocks on the wire: fp32, bf16, int8, int4, int2 (per-row offset and step, stochastic rounding) or auto (default: fp32 on shared memory; between hosts fp32, or int2 where the link measured at start moves under 0.2 GB/s a rank: a block then decodes within about a third of its norm, not within --wire-error; the run says which it chose)")
	fs.Lookup("wire").DefValue = "" // the text says the default: not the fp32 that stands for "the link's choice"
	fs.Var(&w.Grad, "wire-grad", "gradient blocks on the wire (default: as --wire; GAT's gradient rows send their score sums in fp32 beside G)")
	fs.Float64Var(&w.Error, "wire-error", w.Error, "--wire auto: the largest relative error ‖decoded − block‖/‖block‖ a block may get (the link's default choice keeps no such bound)")
	fs.BoolVar(&w.Delta, "wire-delta", false, "a refreshed root sends its change against the copy every rank holds, not its block")
	fs.BoolVar(&w.CacheBits, "cache-bits", false, "keep the cached blocks, this rank's own too, in the wire's bits, decoding a range of rows at a time where they are multiplied (less memory, same results; not with --wire-delta)")
	fs.Var(&w.Allreduce, "wire-allreduce", "weight-gradient allreduce: fp32, or bf16 (half the bytes, with error feedback)")

	fs = g.section("Batch")
	fs.Var(&b.Mode, "batch", "global (the whole graph every step), clusters (--clusters-per-step of the shards' clusters per step; prepare --clusters) or sampled (mini-batches of sampled neighbourhoods, DistDGL-style; gcn, sage or gat)")
	fs.IntVar(&b.ClustersPerStep, "clusters-per-step", 10, "with --batch clusters: clusters in each step's batch")
	fs.BoolVar(&b.Boundary, "boundary", false, "with --batch clusters: a batch's nodes also read their neighbours outside the batch (cached copies, whole-graph normalization)")
	fs.IntSliceVar(&tf.sampled.Fanouts, "fanouts", []int{25, 10}, "with --batch sampled: neighbours sampled per vertex in each layer, layer 1 first (one per --layers; at least the largest degree: every neighbour)")
	fs.IntVar(&tf.sampled.Size, "batch-size", 1000, "with --batch sampled: training vertices in each step's global batch")
	fs.BoolVar(&tf.sampled.Prefetch, "sample-ahead", true, "with --batch sampled: sample and fetch the next batch while this one trains (ByteGNN's pipeline; the same batches and losses)")
	fs.Var(&tf.sampled.Migrate, "migrate", "with --batch sampled: features (each rank fetches its batch's features; the default) or model (HopGNN: the model hops around the ranks to the micrographs' homes, one time step per rank; an iteration whose model would move more bytes than its features fetches them instead; needs --batch-draw global, the same weights)")
	fs.BoolVar(&tf.sampled.Pregather, "pregather", false, "with --migrate model: fetch every time step's remote features once at the start of the iteration (HopGNN §5.2; fewer bytes, the same weights)")
	fs.Var(&tf.sampled.Merge, "merge-micrographs", "with --migrate model: time steps merged away per iteration, their micrographs trained by the same replica elsewhere (HopGNN §5.3; fewer hops, more features fetched), or auto: one more each epoch from the second while the epoch gets faster (the weights agree with a fixed count's to rounding, not bit for bit)")
	fs.Var(&tf.sampled.Draw, "batch-draw", "with --batch sampled: local (each rank draws its share from the training vertices it owns; the default) or global (one global batch, split evenly over the ranks: the same losses at any P)")

	fs = g.section("Exchange (which rows move, and how)")
	fs.BoolVar(&x.Dense, "dense-bcast", x.Dense, "broadcast whole blocks (SANCUS as published) instead of sending each rank only the rows it uses")
	fs.BoolVar(&x.Native, "native-bcast", x.Native, "with --dense-bcast: MPI_Bcast instead of the pipelined ring")
	fs.IntVar(&x.RingChunk, "chunk", x.RingChunk, "ring broadcast chunk in floats (0: 65536)")
	fs.IntVar(&x.SparseChunk, "exchange-chunk", x.SparseChunk, "most bytes of rows in one message of the sparse exchange; more go in chunks through two pack buffers per peer (0: 64 MiB; smaller: less memory, slower)")
	fs.BoolVar(&x.FullOutput, "full-output", x.FullOutput, "compute every row in training: the last layer, and layer 1 on ÂX, not only the rows the loss reads (the same losses; for comparisons)")
	fs.BoolVar(&x.BlockByBlock, "block-by-block", x.BlockByBlock, "multiply every peer block alone, never merged into runs where blocks are shallow (the same sums bit for bit; for comparisons)")
	fs.DurationVar(&tf.timeout, "comm-timeout", 5*time.Minute, "abort the job when a communication wait exceeds this")

	fs = g.section("Checkpoints")
	fs.StringVar(&r.CheckpointDir, "checkpoint-dir", "", "`DIR` for checkpoints (one file per rank per committed epoch)")
	fs.IntVar(&r.CheckpointEvery, "checkpoint-every", 0, "checkpoint every K epochs (0: only on SIGTERM/SIGUSR1)")
	fs.BoolVar(&r.Resume, "resume", false, "continue from the latest checkpoint in --checkpoint-dir (start fresh if there is none)")

	fs = g.section("Output")
	fs.StringVar(&tf.out, "out", "", "results JSON `FILE` (default results/runs/<name>-<job id or time>.json)")
	fs.StringVar(&tf.name, "name", "", "run name used in the default --out")
	fs.BoolVar(&tf.quiet, "quiet", false, "no per-epoch lines")
	r.EvalEvery = train.EvalAuto
	fs.Var(&r.EvalEvery, "eval-every", "evaluate after every k epochs and the last (0: after the last only), or auto: the first epoch, then every k epochs with k fixed from its evaluation's cost (bytes, and a forward pass against a training step) so that evaluating takes at most a tenth of the run, and the last")
	fs.StringVar(&tf.saveModel, "save-model", "", "write the trained model (its weights, as --save-model-at says, and its whole configuration, for sancus predict) to `FILE`")
	fs.Var(&tf.saveModelAt, "save-model-at", "which weights --save-model writes: best (after the best validation epoch, whose test accuracy the run reports) or last")
	fs.StringVar(&tf.saveWeights, "save-weights", "", "write the final weights alone (raw float32, little endian, W0 b0 W1 b1 …) to `FILE`")
	fs.BoolVar(&r.ProfileKernels, "profile-kernels", false, "time kernel calls by class (gemm, spmm, dropout, loss, elementwise, attention) into the results' per-rank kernel_ms, with their bytes and the products' flops (sancus bench triad draws the roofline from them)")

	fs = g.section("Ranks and devices")
	fs.IntVar(&tf.ranks, "ranks", 1, "run this many ranks as goroutines in one process (without mpirun)")
	fs.IntVar(&tf.threads, "threads", 0, "kernel threads per rank (0: GOMAXPROCS / in-process ranks; under MPI, the node's cores / its ranks, or with SANCUS_HOST_CORES=C, which slurm/emu-nodes.sh sets, C / all ranks)")
	fs.Var(&tf.mpiWait, "mpi-wait", "how an MPI rank waits for messages: spin (in MPI's blocking calls, a core a rank), nap (test, then sleep 50 µs; nonblocking collectives) or auto: nap where the ranks sharing the node's cores, or SANCUS_HOST_CORES's, outnumber them")
	fs.Var(&r.Device, "device", "kernels backend: cpu, or cuda in a binary built with make cuda (one GPU per local rank)")
	fs.Var(&x.DeviceComm, "device-comm", "move dense blocks device to device: nccl (in a binary built with make cuda; needs --dense-bcast), or host; default: through the rank transport")
	return g.done()
}

func runTrain(args []string) error {
	cfg := train.Defaults()
	var tf trainFlags
	fs := trainFlagSet(&cfg, &tf)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	tf.wireGiven = fs.Changed("wire") || fs.Changed("wire-grad")
	if (tf.data == "") == (tf.shards == "") {
		return fmt.Errorf("give exactly one of --data or --shards")
	}
	// Training holds its arrays from set-up to the end, and each epoch
	// leaves a few KB of garbage. At the default target the heap grows to
	// twice what is live before the collector runs: a P = 2 rank on the
	// 100k graph went from 109 to 149 MB of peak RSS over 400 epochs. Set-up
	// runs at 10%, the epochs at 2% (trainMPI); a collection costs a few ms
	// at most, since the large arrays hold no pointers.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	if fs.Changed("eps") && cfg.Staleness.Eps < 0 {
		return fmt.Errorf("--eps must be ≥ 0, got %g (leave it out for the policy's own bound)", cfg.Staleness.Eps)
	}
	if err := refuseInert(fs, cfg, tf); err != nil {
		return err
	}
	if cfg.Batch.Mode.Sampled() {
		cfg.Batch.Fanouts, cfg.Batch.Size, cfg.Batch.Draw, cfg.Batch.Prefetch = tf.sampled.Fanouts, tf.sampled.Size, tf.sampled.Draw, tf.sampled.Prefetch && !tf.sampled.Migrate.Model()
		cfg.Batch.Migrate, cfg.Batch.Pregather, cfg.Batch.Merge = tf.sampled.Migrate, tf.sampled.Pregather, tf.sampled.Merge
	}
	if err := checkTrainFlags(cfg, tf); err != nil {
		return err
	}
	if err := outFile(tf.out, "the results JSON file", "run.json"); err != nil {
		return err
	}
	if !tf.quiet {
		cfg.Run.Log = os.Stdout
	}
	env, err := launch.Detect()
	if err != nil {
		return err
	}
	rep := &result.Run{Command: "sancus " + strings.Join(args, " "), Started: time.Now().UTC(), JobID: env.JobID, Launcher: env.Launcher,
		Link: os.Getenv("SANCUS_LINK")}
	rep.Host, _ = os.Hostname()
	rep.Cores, rep.RanksOnHost = runtime.NumCPU(), env.LocalSize
	if env.Launcher == "none" {
		rep.RanksOnHost = tf.ranks
	}
	rep.Shards, rep.Partitioner = tf.shards, "contiguous"
	if tf.shards != "" {
		rep.Partitioner = ""
		if m, err := shard.ReadMeta(tf.shards); err == nil {
			rep.Partitioner = m.Partitioner
		}
	}
	stops := launch.WatchStops(fmt.Sprintf("rank %d", env.Rank), func() { unlock() })
	cfg.Run.Stop, cfg.Run.Training = stops.Requested, stops.Training
	// Every output is known and test-written before any work: a run must not
	// learn after hours of training that its results have nowhere to go.
	if tf.out == "" {
		tf.out = defaultOut(tf, cfg, rep)
	}
	if err := checkOutputs(cfg, tf, env.Rank == 0); err != nil {
		return err
	}
	if env.Rank == 0 {
		release, err := lockOutputs(cfg, tf)
		if err != nil {
			return err
		}
		unlock = release
		defer release()
	}
	if env.Parallel() {
		cfg.Run.LocalRank, cfg.Run.RanksOnHost = env.LocalRank, env.LocalSize // one device per rank on its node; its memory shared
		if tf.ranks != 1 {
			return fmt.Errorf("--ranks is for single-process runs; under %s the launcher sets the rank count", env.Launcher)
		}
		return trainMPI(cfg, tf, rep)
	}
	setThreads(tf.threads, tf.ranks, 0)
	cfg.Run.BaseRSSMB = launch.RSSMB()
	var res train.Outcome
	if tf.data != "" {
		ds, lerr := graph.Load(tf.data, tf.load)
		if lerr != nil {
			return lerr
		}
		noteEdgeValues(tf.data)
		noteSplits(ds)
		rep.Dataset, rep.Nodes = ds.Name, ds.N
		printStart(cfg, tf.ranks, ds.Name, ds.N, "in-process")
		res, err = runInProcess(ds, tf.ranks, cfg)
	} else {
		shards := make([]*shard.Shard, tf.ranks)
		for r := range shards {
			if shards[r], err = shard.Read(tf.shards, r, tf.ranks); err != nil {
				return err
			}
		}
		rep.Dataset, rep.Nodes = shardDataset(tf.shards), shards[0].N
		printStart(cfg, tf.ranks, rep.Dataset, rep.Nodes, "in-process")
		res, err = train.RunShards(shards, cfg)
	}
	if err != nil && !errors.Is(err, train.ErrStopped) && !errors.Is(err, train.ErrDiverged) {
		return err
	}
	rep.Config, rep.Result = res.Plan, res.Result
	sideErr, ferr := finish(rep, res.Plan, tf, res.Params, res.BestParams)
	if ferr != nil {
		return ferr
	}
	return ended(err, cfg, rep.Result, sideErr)
}

// defaultOut is results/runs/<name>-<job id or start time>.json, named
// from the dataset directory, the rank count and the policy.
func defaultOut(tf trainFlags, cfg train.Config, rep *result.Run) string {
	name := tf.name
	if name == "" {
		ds := filepath.Base(tf.data)
		if tf.shards != "" {
			ds = shardDataset(tf.shards)
		}
		ranks := tf.ranks
		if env, err := launch.Detect(); err == nil && env.Parallel() {
			ranks = env.Size
		}
		name = fmt.Sprintf("%s-P%d-%s", ds, ranks, strings.ReplaceAll(cfg.Staleness.Policy.String(), "-", ""))
	}
	id := rep.JobID
	if id == "" {
		id = rep.Started.Format("20060102T150405")
	}
	return filepath.Join("results", "runs", name+"-"+id+".json")
}

// maxInProcessRanks bounds --ranks: each in-process rank holds a world's
// queues and its own engine, and past a thousand one process is the wrong
// tool (the launcher's ranks are not bounded here).
const maxInProcessRanks = 1024

// checkTrainFlags rejects nonsensical values before any work.
func checkTrainFlags(cfg train.Config, tf trainFlags) error {
	switch {
	case tf.ranks < 1:
		return fmt.Errorf("--ranks must be ≥ 1, got %d", tf.ranks)
	case tf.ranks > maxInProcessRanks:
		return fmt.Errorf("--ranks %d: in-process ranks are goroutines of one process, at most %d; start more with mpirun or srun (sancus launch -n %d -- train …)", tf.ranks, maxInProcessRanks, tf.ranks)
	case tf.threads < 0:
		return fmt.Errorf("--threads must be ≥ 0 (0: automatic), got %d", tf.threads)
	case tf.threads > launch.HostLimit():
		return fmt.Errorf("--threads %d: at most %d kernel threads a rank on this machine's %d cores", tf.threads, launch.HostLimit(), runtime.NumCPU())
	case tf.timeout <= 0:
		return fmt.Errorf("--comm-timeout must be > 0, got %v", tf.timeout)
	}
	return cfg.Validate()
}

// inert are the flags that do nothing unless another setting holds. One
// given without it is refused, naming both, rather than silently ignored.
var inert = []struct {
	flags []string
	needs string
	holds func(cfg train.Config, tf trainFlags) bool
}{
	{[]string{"native-bcast", "chunk", "device-comm"}, "--dense-bcast", func(c train.Config, _ trainFlags) bool { return c.Exchange.Dense }},
	{[]string{"exchange-chunk"}, "the sparse exchange (not --dense-bcast)", func(c train.Config, _ trainFlags) bool { return !c.Exchange.Dense }},
	{[]string{"heads", "out-heads", "att-dropout"}, "--model gat", func(c train.Config, _ trainFlags) bool { return c.Model.Arch.Attends() }},
	{[]string{"clusters-per-step", "boundary"}, "--batch clusters", func(c train.Config, _ trainFlags) bool { return c.Batch.Mode.Clusters() }},
	{[]string{"fanouts", "batch-size", "batch-draw", "sample-ahead", "migrate"}, "--batch sampled", func(c train.Config, _ trainFlags) bool { return c.Batch.Mode.Sampled() }},
	{[]string{"pregather", "merge-micrographs"}, "--migrate model", func(_ train.Config, tf trainFlags) bool { return tf.sampled.Migrate.Model() }},
	{[]string{"sample-ahead"}, "--migrate features (a moving model samples each time step as it goes)", func(_ train.Config, tf trainFlags) bool { return !tf.sampled.Migrate.Model() }},
	{[]string{"eps", "max-stale", "skip-gradients"}, "a --staleness policy other than none", func(c train.Config, _ trainFlags) bool { return c.Staleness.Policy.Skips() }},
	{[]string{"wire-error"}, "--wire auto or --wire-grad auto", func(c train.Config, _ trainFlags) bool { return c.Wire.Fwd.IsAuto() || c.Wire.Grad.IsAuto() }},
	{[]string{"clip-scale"}, "--clip", func(c train.Config, _ trainFlags) bool { return c.Optim.Clip > 0 }},
	{[]string{"normalize-features", "split", "split-seed", "split-name", "classes"}, "--data (shards carry how they were prepared)", func(_ train.Config, tf trainFlags) bool { return tf.data != "" }},
	{[]string{"checkpoint-every", "resume"}, "--checkpoint-dir", func(c train.Config, _ trainFlags) bool { return c.Run.CheckpointDir != "" }},
	{[]string{"save-model-at"}, "--save-model", func(_ train.Config, tf trainFlags) bool { return tf.saveModel != "" }},
}

// refuseInert refuses a flag given where it does nothing (inert).
func refuseInert(fs *pflag.FlagSet, cfg train.Config, tf trainFlags) error {
	for _, r := range inert {
		if r.holds(cfg, tf) {
			continue
		}
		for _, f := range r.flags {
			if fs.Changed(f) {
				return fmt.Errorf("--%s does nothing without %s: drop it, or add that", f, r.needs)
			}
		}
	}
	return nil
}

// shardDataset names the dataset a shard directory was prepared from (its
// meta.json), so runs over shards of one graph for different P group
// together in reports.
func shardDataset(dir string) string {
	if m, err := shard.ReadMeta(dir); err == nil && m.Dataset != "" {
		return m.Dataset
	}
	return filepath.Base(dir)
}

// noteSplits warns, on stderr, of splits a run would quietly misreport:
// an empty validation or test split.
func noteSplits(ds *graph.Dataset) {
	if len(ds.Val) == 0 {
		fmt.Fprintf(os.Stderr, "sancus: %s has no validation nodes: the epoch reported as best is the last\n", ds.Name)
	}
	if len(ds.Test) == 0 {
		fmt.Fprintf(os.Stderr, "sancus: %s has no test nodes: its test accuracy is not measured (reported as 0)\n", ds.Name)
	}
	for _, s := range []struct {
		name string
		n    int
	}{{"training", len(ds.Train)}, {"validation", len(ds.Val)}, {"test", len(ds.Test)}} {
		if s.n > 0 && s.n < tinySplit {
			fmt.Fprintf(os.Stderr, "sancus: %s has %d %s nodes: an accuracy over so few moves in steps of %.0f%%; check the split files or --split\n",
				ds.Name, s.n, s.name, 100/float64(s.n))
		}
	}
}

// tinySplit is the split size below which an accuracy over it says little
// (one node is a step of 5% or more).
const tinySplit = 20

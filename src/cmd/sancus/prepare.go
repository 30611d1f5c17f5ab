package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sancus/launch"
	"sancus/src/atomicfile"
	"sancus/src/progress"
	"strconv"
	"time"

	"sancus/src/graph"
	"sancus/src/partition"
	"sancus/src/prepare"
	"sancus/src/shard"

	"github.com/spf13/pflag"
)

func runPrepare(args []string) (err error) {
	fs := newFlags("prepare", "prepare --data DIR --parts P --out DIR [flags]")
	data := fs.String("data", "", "dataset `DIR` (or .npz file) (required)")
	parts := fs.Int("parts", 0, "number of ranks the shards are for (required)")
	out := fs.String("out", "", "shard `DIR` to write, a file per rank and meta.json (required; created if missing)")
	pre := fs.Bool("precompute", true, "store the rows of ÂX and D⁻¹AX, so layer 1 of a GCN or GraphSAGE needs no communication")
	clusters := fs.Int("clusters", 0, "also cut the graph into `K` clusters (K ≫ ranks) for train --batch clusters, with --partitioner (grem unless given: grem, spring, random or file); every rank's rows are whole clusters")
	quiet := fs.Bool("quiet", false, "no progress lines (on stderr: in place on a terminal, every 30 s in a log)")
	var load graph.LoadOptions
	addLoadFlags(fs, &load, "")
	pf := addPartitionFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *data == "" || *out == "" || *parts < 1 {
		return fmt.Errorf("--data, --out and --parts ≥ 1 are required")
	}
	if err := outDir(*out, "the shard directory prepare writes"); err != nil {
		return err
	}
	noteEdgeValues(*data)
	start := time.Now()
	// What prepare read and how, for the shard set's identity: the data's
	// files with their sizes, the loader's flags and the partitioner.
	identity := dataIdentity(*data, load)
	pf.load = load
	opt := prepare.Options{Source: fmt.Sprintf("%s %s partitioner=%v", filepath.Base(*data), identity, pf.kind)}
	if *pre {
		opt.Precompute = shard.Aggregations
	}
	var took time.Duration
	if *clusters > 0 {
		if !fs.Changed("partitioner") {
			pf.kind = partition.KindGrem
			fmt.Printf("clusters: %d cut by grem (--partitioner names another)\n", *clusters)
		}
		if !pf.kind.Reorders() {
			return fmt.Errorf("--clusters needs a partitioner that finds clusters (grem, spring, random or file), not contiguous")
		}
		if opt.Clusters, took, err = pf.run(*data, *clusters); err != nil {
			return fmt.Errorf("--clusters %d: %w", *clusters, err)
		}
		opt.NumClusters = *clusters
		if opt.Parts, err = prepare.ClusterRanks(opt.Clusters, *clusters, *parts); err != nil {
			return fmt.Errorf("--clusters %d: %w", *clusters, err)
		}
	} else if opt.Parts, took, err = pf.run(*data, *parts); err != nil {
		return err
	}
	opt.Nodes = pf.nodes
	// The directory is complete only once meta.json is written, last; a
	// failed prepare leaves no empty directory it created.
	_, statErr := os.Stat(*out)
	created := os.IsNotExist(statErr)
	defer func() {
		if err != nil && created {
			os.RemoveAll(*out)
		}
	}()
	if err := atomicfile.CheckDir(*out); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	os.Remove(filepath.Join(*out, shard.MetaFile))
	// prepare allocates its large arrays once and keeps them to the end: a
	// tighter collector target (the default lets the heap reach twice what
	// is live) cuts its peak by a quarter for under a tenth more time.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	// Streaming: the edge list is never held whole (see prepare.Streaming).
	var blocks []partition.PartBlocks
	opt.OnShard = func(s *shard.Shard) { blocks = append(blocks, partBlocks(s)) }
	stages := progress.NewStages(progressTo(*quiet), "prepare")
	opt.Progress = stages.Report
	prep, err := prepare.Streaming(*data, *out, *parts, opt, load)
	stages.Done()
	if err != nil {
		return err
	}
	metrics := partition.FromBlocks(blocks)
	ds := prep.DS
	meta := shard.Meta{Dataset: ds.Name, Data: identity, Parts: *parts, Nodes: ds.N, Features: ds.Features.Cols, Classes: ds.Classes,
		Precomputed: *pre, NormalizeFeatures: load.NormalizeFeatures, Split: load.Split, SplitSeed: load.SplitSeed, SplitName: load.SplitName, Offsets: prep.Offsets, Partitioner: pf.kind.String(), Partition: metrics, PartitionS: took.Seconds(), Clusters: *clusters,
		PeakRSSMB: launch.PeakRSSMB(), CompulsoryMB: prep.CompulsoryMB(), Created: time.Now().UTC(), Set: fmt.Sprintf("%016x", prep.Set)}
	if err := shard.WriteMeta(*out, meta); err != nil {
		return err
	}
	fmt.Printf("wrote %d shards of %s (%d nodes, %d nonzeros in Â) to %s in %.1fs, peak memory %.0f MB (it must hold %.0f MB at once)\n",
		*parts, ds.Name, ds.N, prep.NNZ(), *out, time.Since(start).Seconds(), meta.PeakRSSMB, meta.CompulsoryMB)
	printMetrics(pf.kind, metrics)
	noteTrainBalance(metrics)
	return nil
}

// trainImbalance is how far past the mean the part with the most training
// nodes may go before prepare warns.
const trainImbalance = 1.5

// noteTrainBalance warns, on stderr, when the training nodes crowd into
// some parts (a contiguous cut of a dataset whose training nodes come
// first, as Cora's do). A full-graph step's work follows rows and
// nonzeros, which the cut balances; a sampled step's follows the training
// nodes a rank draws from, and a rank with none idles.
func noteTrainBalance(m partition.Metrics) {
	if m.TrainBalance <= trainImbalance {
		return
	}
	fmt.Fprintf(os.Stderr, "sancus prepare: the training nodes are unbalanced across the parts (%v a part; the largest %.2fx the mean): full-graph training is not slowed by it, but with train --batch sampled the ranks draw unequal batches: --balance-by train evens them (the rows stay), --partitioner bytegnn evens training, validation and test nodes\n",
		m.Trains, m.TrainBalance)
}

// partBlocks summarizes a shard for the partition metrics.
func partBlocks(s *shard.Shard) partition.PartBlocks {
	b := partition.PartBlocks{Rows: s.Rows(), Train: len(s.Train), Val: len(s.Val), Test: len(s.Test), Needed: make([]int, s.Parts)}
	for j, blk := range s.Blocks {
		b.NNZ += blk.NNZ()
		if j == s.Rank {
			b.Diag = blk.NNZ()
			continue
		}
		used := make(map[int32]struct{})
		for _, c := range blk.ColIdx {
			used[c] = struct{}{}
		}
		b.Needed[j] = len(used)
	}
	return b
}

// writeAtomic writes b so that readers see the old file or the new one.
func writeAtomic(path string, b []byte) error { return atomicfile.WriteBytes(path, b) }

// addLoadFlags adds the flags of how a dataset is read.
func addLoadFlags(fs *pflag.FlagSet, o *graph.LoadOptions, when string) {
	fs.BoolVar(&o.NormalizeFeatures, "normalize-features", true, "row-normalize features"+when)
	addSplitFlags(fs, o, when)
	fs.Var((*classesFlag)(&o.Classes), "classes", "number of classes, where the labels leave some ids unused (0: 0 up to the largest label, every one used)"+when)
}

// addSplitFlags adds the flags of which split a dataset's nodes fall into.
func addSplitFlags(fs *pflag.FlagSet, o *graph.LoadOptions, when string) {
	o.Split = "random"
	fs.Var((*splitFlag)(&o.Split), "split", "split of datasets that ship none: random (10/10/80) or planetoid (20 per class, 500, 1000)"+when)
	fs.Uint64Var(&o.SplitSeed, "split-seed", 1, "seed of that split"+when)
	fs.StringVar(&o.SplitName, "split-name", "", "which split/<name>/ of an OGB dataset (needed when it has several)"+when)
}

// splitFlag is --split: a name the loader knows, refused at the flag
// otherwise, even for a dataset that ships its own split.
type splitFlag string

func (s *splitFlag) Set(v string) error {
	if v != "random" && v != "planetoid" {
		return fmt.Errorf("unknown split %q (random or planetoid)", v)
	}
	*s = splitFlag(v)
	return nil
}
func (s *splitFlag) String() string { return string(*s) }
func (s *splitFlag) Type() string   { return "split" }

// classesFlag is --classes: a count, 0 for "from the labels".
type classesFlag int

func (c *classesFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a number of classes ≥ 0 (0: 0 up to the largest label)", v)
	}
	*c = classesFlag(n)
	return nil
}
func (c *classesFlag) String() string { return strconv.Itoa(int(*c)) }
func (c *classesFlag) Type() string   { return "int" }

// dataIdentity is what a dataset is as sancus reads it, without its name:
// its files and their sizes, feature normalization and the split drawn.
// A model file keeps it, and predict warns when its data's differs.
func dataIdentity(data string, load graph.LoadOptions) string {
	var files []string
	add := func(p string) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			files = append(files, fmt.Sprintf("%s:%d", filepath.Base(p), fi.Size()))
		}
	}
	if entries, err := os.ReadDir(data); err == nil {
		for _, e := range entries {
			add(filepath.Join(data, e.Name()))
		}
	} else {
		add(data)
	}
	return fmt.Sprintf("%v normalize=%v split=%s/%d/%s", files, load.NormalizeFeatures, load.Split, load.SplitSeed, load.SplitName)
}

// progressTo is where a long step's progress goes: stderr, unless quiet.
func progressTo(quiet bool) io.Writer {
	if quiet {
		return nil
	}
	return os.Stderr
}

// noteEdgeValues says, on stderr, that a graph file's edge values are
// ignored: the models normalize the unweighted graph.
func noteEdgeValues(data string) {
	if p, f, ok := graph.EdgeValues(data); ok {
		fmt.Fprintf(os.Stderr, "sancus: %s holds %s edge values; sancus trains on the graph's pattern (Â = D^-1/2 (A+I) D^-1/2 of the unweighted graph), so they are ignored\n", p, f)
	}
}

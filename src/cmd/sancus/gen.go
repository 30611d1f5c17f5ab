package main

import (
	"fmt"
	"os"
	"sancus/src/progress"
	"time"

	"sancus/src/graph"
)

func init() { register("gen", "generate a synthetic dataset directory", runGen) }

func runGen(args []string) error {
	fs := newFlags("gen", "gen --out DIR [flags]")
	out := fs.String("out", "", "output dataset directory (required)")
	c := graph.GenConfig{}
	fs.StringVar(&c.Model, "model", "planted", "planted (planted partition) or rmat (Graph500 R-MAT power law)")
	fs.IntVar(&c.Nodes, "nodes", 100000, "number of nodes")
	fs.Int64Var(&c.Edges, "edges", 1000000, "number of undirected edges")
	fs.IntVar(&c.Features, "features", 128, "feature dimension (binary features)")
	fs.IntVar(&c.FeatureNNZ, "feature-nnz", 16, "ones per feature row")
	fs.IntVar(&c.Classes, "classes", 16, "number of classes")
	fs.Float64Var(&c.PIn, "p-in", 0.4, "planted: probability an edge joins two nodes of one class")
	fs.Float64Var(&c.FeatureSig, "feature-signal", 0.3, "probability a feature is drawn from the node's class band")
	fs.Float64Var(&c.TrainFrac, "train", 0.1, "fraction of nodes in the training split")
	fs.Float64Var(&c.ValFrac, "val", 0.1, "fraction of nodes in the validation split (the rest is test)")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed")
	fs.BoolVar(&c.MultiLabel, "multilabel", false, "multi-label classes (labels-multi.txt): the planted class, the next with probability 1/2, any other with 1/10")
	format := fs.String("format", "mtx", "layout written: mtx (graph.mtx, features.mtx, labels.txt, splits) or ogb (OGB's raw/*.csv.gz and split/random/)")
	quiet := fs.Bool("quiet", false, "no progress lines (on stderr: in place on a terminal, every 30 s in a log)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	start := time.Now()
	meter := progress.New(progressTo(*quiet), "gen", c.Edges, "edges")
	c.Progress = func(done, _ int64) { meter.Set(done) }
	switch *format {
	case "mtx":
		if err := graph.Generate(*out, c); err != nil {
			return err
		}
	case "ogb":
		if err := generateOGB(*out, c); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--format %q: mtx or ogb", *format)
	}
	meter.Done()
	fmt.Printf("generated %s graph in %s: %d nodes, %d edges, %d features, %d classes (%.1fs)\n",
		c.Model, *out, c.Nodes, c.Edges, c.Features, c.Classes, time.Since(start).Seconds())
	return nil
}

// generateOGB writes the graph that Generate writes, in OGB's layout: the
// same nodes, edges, features, labels and split.
func generateOGB(out string, c graph.GenConfig) error {
	tmp, err := os.MkdirTemp("", "sancus-gen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := graph.Generate(tmp, c); err != nil {
		return err
	}
	ds, err := graph.Load(tmp, graph.LoadOptions{})
	if err != nil {
		return err
	}
	return graph.WriteOGB(ds, out)
}

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"sancus/src/graph"
	"sancus/src/progress"
)

func runGen(args []string) error {
	fs := newFlags("gen", "gen --out DIR [flags]")
	out := fs.String("out", "", "dataset `DIR` to write (required; created if missing)")
	c := graph.GenConfig{}
	fs.StringVar(&c.Model, "generator", "planted", "planted (planted partition), rmat (Graph500 R-MAT power law) or dcsbm (degree-corrected block model: power-law degrees, communities)")
	// --model names the GNN everywhere else (train, predict, plan): the
	// generator's old name is kept for scripts, one release.
	fs.StringVar(&c.Model, "model", "planted", "the generator (old name of --generator)")
	fs.MarkHidden("model")
	fs.IntVar(&c.Nodes, "nodes", 100000, "number of nodes")
	fs.Int64Var(&c.Edges, "edges", 1000000, "number of undirected edges (dcsbm with --min-degree and no --edges: as many as the degrees ask)")
	fs.IntVar(&c.Features, "features", 128, "feature dimension (binary features)")
	fs.IntVar(&c.FeatureNNZ, "feature-nnz", 16, "ones per feature row")
	fs.IntVar(&c.Classes, "classes", 16, "number of classes")
	// The planted defaults are the reference graph's (bench kernels): a
	// task a GCN at the Kipf–Welling settings learns whatever the seed,
	// with or without ÂX (results/README.md, "Learnability and the ÂX shortcut").
	fs.Float64Var(&c.PIn, "p-in", 0.8, "planted: probability an edge joins two nodes of one class")
	fs.Float64Var(&c.FeatureSig, "feature-signal", 0.5, "probability a feature is drawn from the node's class band")
	fs.Float64Var(&c.TrainFrac, "train", 0.1, "fraction of nodes in the training split")
	fs.Float64Var(&c.ValFrac, "val", 0.1, "fraction of nodes in the validation split (the rest is test)")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed")
	fs.Float64Var(&c.Exponent, "degree-exponent", 2.5, "dcsbm: exponent γ of the degree law p(d) ∝ d^-γ")
	fs.IntVar(&c.MinDegree, "min-degree", 0, "dcsbm: smallest expected degree (0: the one whose mean is 2·edges/nodes)")
	fs.IntVar(&c.MaxDegree, "max-degree", 1000, "dcsbm: largest expected degree")
	fs.Float64Var(&c.Homophily, "homophily", 0.8, "dcsbm: fraction of a node's edges inside its class")
	like := fs.String("like", "", "dcsbm with the size and shape of arxiv, products or reddit (nodes, edges, features, classes, degree law; 4 feature ones per row); flags given beside it win")
	scale := fs.Float64("scale", 1, "with --like: multiply nodes and edges")
	fs.BoolVar(&c.MultiLabel, "multilabel", false, "multi-label classes (labels-multi.txt): the planted class, the next with probability 1/2, any other with 1/10")
	format := fs.String("format", "mtx", "layout written: mtx (graph.mtx, features.mtx, labels.txt, splits) or ogb (OGB's raw/*.csv.gz and split/random/)")
	quiet := fs.Bool("quiet", false, "no progress lines (on stderr: in place on a terminal, every 30 s in a log)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if fs.Changed("model") {
		fmt.Fprintln(os.Stderr, "sancus gen: --model is now --generator (--model is the GNN in train); the old name goes in a later release")
	}
	if *out == "" {
		return fmt.Errorf("--out is required")
	}
	if err := outDir(*out, "the dataset directory gen writes"); err != nil {
		return err
	}
	if err := applyLike(fs, &c, *like, *scale); err != nil {
		return err
	}
	for _, name := range []string{"degree-exponent", "min-degree", "max-degree", "homophily"} {
		if fs.Changed(name) && c.Model != "dcsbm" {
			return fmt.Errorf("--%s applies to --generator dcsbm, not %s", name, c.Model)
		}
	}
	if c.Model == "dcsbm" && c.MinDegree > 0 && !fs.Changed("edges") && *like == "" {
		c.Edges = 0 // the degree law sets it
	}
	if fs.Changed("p-in") && c.Model != "planted" {
		return fmt.Errorf("--p-in applies to --generator planted, not %s (dcsbm: --homophily)", c.Model)
	}
	var degrees graph.DegreeStats
	c.Degrees = func(d graph.DegreeStats) { degrees = d }
	// A signal stops the writers between lines, so the file being written
	// is removed instead of left as a large half-file; a second signal
	// kills at once.
	ctx, release := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer release()
	c.Stop = func() bool {
		if ctx.Err() != nil {
			release()
			return true
		}
		return false
	}
	start := time.Now()
	meter := progress.New(progressTo(*quiet), "gen", c.Edges, "edges")
	c.Progress = func(done, _ int64) { meter.Set(done) }
	switch *format {
	case "mtx":
		if err := graph.Generate(*out, c); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("gen: %w; the file it was writing in %s was removed (the others are complete)", err, *out)
			}
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
	fmt.Printf("generated %s graph in %s: %d nodes, %d edge lines (a reader drops repeats and loops), %d features, %d classes (%.1fs)\n",
		c.Model, *out, c.Nodes, degrees.Edges, c.Features, c.Classes, time.Since(start).Seconds())
	fmt.Printf("degrees of the edge lines: max %d, min %d, mean %.1f; the top 1%% of rows hold %.1f%% of the nonzeros\n",
		degrees.Max, degrees.Min, degrees.Mean, 100*degrees.Top1Share)
	return nil
}

// applyLike sets c to a --like preset, scaled; flags given on the command
// line keep their values.
func applyLike(fs *pflag.FlagSet, c *graph.GenConfig, like string, scale float64) error {
	if like == "" {
		if fs.Changed("scale") {
			return fmt.Errorf("--scale needs --like")
		}
		return nil
	}
	l, ok := graph.Likes[like]
	if !ok {
		return fmt.Errorf("--like %q: arxiv, products or reddit", like)
	}
	if !(scale > 0) || scale > 100 {
		return fmt.Errorf("--scale %g must be in (0, 100]", scale)
	}
	given := *c
	l.Apply(c, scale)
	generatorGiven := fs.Changed("generator") || fs.Changed("model")
	if generatorGiven && given.Model != "dcsbm" {
		return fmt.Errorf("--like makes a dcsbm graph, not --generator %s", given.Model)
	}
	for _, f := range []struct {
		name string
		set  func()
	}{
		{"generator", func() { c.Model = given.Model }},
		{"model", func() { c.Model = given.Model }},
		{"nodes", func() { c.Nodes = given.Nodes }},
		{"edges", func() { c.Edges = given.Edges }},
		{"features", func() { c.Features = given.Features }},
		{"feature-nnz", func() { c.FeatureNNZ = given.FeatureNNZ }},
		{"classes", func() { c.Classes = given.Classes }},
		{"degree-exponent", func() { c.Exponent = given.Exponent }},
		{"min-degree", func() { c.MinDegree = given.MinDegree }},
		{"max-degree", func() { c.MaxDegree = given.MaxDegree }},
		{"homophily", func() { c.Homophily = given.Homophily }},
	} {
		if fs.Changed(f.name) {
			f.set()
		}
	}
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

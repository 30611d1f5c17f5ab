package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sancus/src/graph"
	"sancus/src/model"
	"sancus/src/shard"
	"sancus/src/train"
)

func runInfo(args []string) error {
	fs := newFlags("info", "info PATH...   (a dataset directory or file, a shard directory, a model file, a checkpoint directory)")
	var load graph.LoadOptions
	addLoadFlags(fs, &load, " (datasets)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("give a path: a dataset, a shard directory, a model file or a checkpoint directory")
	}
	var failed []string
	for _, p := range fs.Args() {
		if err := info(os.Stdout, p, load); err != nil {
			fmt.Printf("%s: NOT usable: %v\n", p, err)
			failed = append(failed, p)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: incomplete or corrupt (above)", strings.Join(failed, ", "))
	}
	return nil
}

// info describes one path, reading all of it, so that a file a run would
// refuse is found here.
func info(w io.Writer, p string, load graph.LoadOptions) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(p, name)); return err == nil }
	switch {
	case fi.IsDir() && shard.IsDir(p): // complete or not: a shard directory is no dataset
		return shardInfo(w, p)
	case fi.IsDir() && exists("LATEST"):
		st, err := train.InspectCheckpoint(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: checkpoint after epoch %d, %d rank files, every checksum good\n  run: %s\n", p, st.Epoch, st.Ranks, st.Signature)
		return nil
	case !fi.IsDir() && !strings.HasSuffix(p, ".npz"):
		if spec, m, err := model.Load(p); err == nil {
			fmt.Fprintf(w, "%s: %s model, %d layers, widths %v", p, strings.ToUpper(spec.Model.String()), spec.Layers, spec.Dims)
			if len(spec.Heads) > 0 {
				fmt.Fprintf(w, ", heads %v", spec.Heads)
			}
			fmt.Fprintf(w, ", %d parameters, %s-label over %d classes\n  weights after epoch %d, test accuracy %.4f; checksum good\n",
				m.NumParams(), spec.LabelKind, spec.Classes, spec.Epochs, spec.FinalTestAcc)
			return nil
		} else if !errors.Is(err, model.ErrNotModel) {
			return err
		}
	}
	ds, err := graph.Load(p, load)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: dataset %s, %d nodes, %d undirected edges, %d features (%d nonzeros), %d classes",
		p, ds.Name, ds.N, ds.Adj.NNZ()/2, ds.Features.Cols, ds.Features.NNZ(), ds.Classes)
	if ds.Multi != nil {
		fmt.Fprint(w, " (multi-label)")
	}
	fmt.Fprintf(w, "\n  split: %d train, %d validation, %d test\n", len(ds.Train), len(ds.Val), len(ds.Test))
	return nil
}

// shardInfo describes a shard directory, reading every shard file whole.
// It refuses a directory as training does (shard.OpenDir).
func shardInfo(w io.Writer, dir string) error {
	meta, err := shard.OpenDir(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d shards of %s, %d nodes, %d features, %d classes, set %s\n  partitioner %s: %s\n",
		dir, meta.Parts, meta.Dataset, meta.Nodes, meta.Features, meta.Classes, meta.Set, meta.Partitioner, partitionWords(meta.Partition))
	for r := range meta.Parts {
		s, err := shard.Read(dir, r, meta.Parts)
		if err != nil {
			return err
		}
		if got := fmt.Sprintf("%016x", s.Set); meta.Set != "" && got != meta.Set {
			return fmt.Errorf("%s is of shard set %s, the directory's is %s: a file of another prepare", shard.FileName(r, meta.Parts), got, meta.Set)
		}
		fmt.Fprintf(w, "  rank %d: rows %d..%d (%d), %d training nodes\n", r, s.Offsets[r], s.Offsets[r+1]-1, s.Rows(), len(s.Train))
	}
	fmt.Fprintf(w, "  every shard read whole, every checksum good\n")
	return nil
}

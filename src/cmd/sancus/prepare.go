package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sancus/src/graph"
	"sancus/src/shard"
)

func init() { register("prepare", "split a dataset into one shard file per rank", runPrepare) }

// Meta describes a shard directory (meta.json), for people and tools; each
// shard file is self-describing and checked on its own.
type Meta struct {
	Dataset     string    `json:"dataset"`
	Parts       int       `json:"parts"`
	Nodes       int       `json:"nodes"`
	Features    int       `json:"features"`
	Classes     int       `json:"classes"`
	Precomputed bool      `json:"precomputed_ax"`
	Offsets     []int64   `json:"offsets"`
	Partition   PartStats `json:"partition"`
	Created     time.Time `json:"created"`
}

// PartStats measures a partition.
type PartStats struct {
	RowsPerPart     []int     `json:"rows_per_part"`
	NNZPerPart      []int64   `json:"nnz_per_part"`
	TrainPerPart    []int     `json:"train_per_part"`
	RowBalance      float64   `json:"row_balance"` // max / mean
	NNZBalance      float64   `json:"nnz_balance"`
	TrainBalance    float64   `json:"train_balance"`
	Locality        []float64 `json:"locality"` // nnz(Â_ii) / nnz(Â_i,:)
	NonEmptyOffDiag int       `json:"nonempty_offdiag_blocks"`
}

func partStats(shards []*shard.Shard) PartStats {
	var ps PartStats
	for _, s := range shards {
		ps.RowsPerPart = append(ps.RowsPerPart, s.Rows())
		ps.TrainPerPart = append(ps.TrainPerPart, len(s.Train))
		var nnz int64
		for j, b := range s.Blocks {
			nnz += b.NNZ()
			if j != s.Rank && b.NNZ() > 0 {
				ps.NonEmptyOffDiag++
			}
		}
		ps.NNZPerPart = append(ps.NNZPerPart, nnz)
		loc := 0.0
		if nnz > 0 {
			loc = float64(s.Blocks[s.Rank].NNZ()) / float64(nnz)
		}
		ps.Locality = append(ps.Locality, loc)
	}
	ps.RowBalance = balance(ps.RowsPerPart)
	ps.NNZBalance = balance(ps.NNZPerPart)
	ps.TrainBalance = balance(ps.TrainPerPart)
	return ps
}

func balance[T int | int64](xs []T) float64 {
	var sum, mx float64
	for _, x := range xs {
		sum += float64(x)
		mx = max(mx, float64(x))
	}
	if sum == 0 {
		return 1
	}
	return mx / (sum / float64(len(xs)))
}

func runPrepare(args []string) error {
	fs := newFlags("prepare", "prepare --data DIR --parts P --out SHARDS [flags]")
	data := fs.String("data", "", "dataset directory (required)")
	parts := fs.Int("parts", 0, "number of ranks the shards are for (required)")
	out := fs.String("out", "", "output shard directory (required)")
	pre := fs.Bool("precompute", true, "store (ÂX) rows so layer 1 needs no communication")
	norm := fs.Bool("normalize-features", true, "row-normalize features")
	splitSeed := fs.Uint64("split-seed", 1, "seed of the 10/10/80 split for datasets without one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *data == "" || *out == "" || *parts < 1 {
		return fmt.Errorf("--data, --out and --parts ≥ 1 are required")
	}
	start := time.Now()
	ds, err := graph.Load(*data, graph.LoadOptions{NormalizeFeatures: *norm, SplitSeed: *splitSeed})
	if err != nil {
		return err
	}
	prep, err := shard.Prepare(ds, *parts, shard.Options{Precompute: *pre})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	shards := make([]*shard.Shard, *parts)
	for r := range shards {
		if shards[r], err = prep.Shard(r); err != nil {
			return err
		}
		if err := shards[r].Write(*out); err != nil {
			return err
		}
	}
	meta := Meta{Dataset: ds.Name, Parts: *parts, Nodes: ds.N, Features: ds.Features.Cols, Classes: ds.Classes,
		Precomputed: *pre, Offsets: prep.Offsets, Partition: partStats(shards), Created: time.Now().UTC()}
	b, _ := json.MarshalIndent(meta, "", "  ")
	if err := writeAtomic(filepath.Join(*out, "meta.json"), append(b, '\n')); err != nil {
		return err
	}
	p := meta.Partition
	fmt.Printf("wrote %d shards of %s (%d nodes, %d nonzeros in Â) to %s in %.1fs\n", *parts, ds.Name, ds.N, prep.AHat.NNZ(), *out, time.Since(start).Seconds())
	fmt.Printf("balance (max/mean): rows %.3f  nonzeros %.3f  train nodes %.3f; non-empty off-diagonal blocks %d of %d\n",
		p.RowBalance, p.NNZBalance, p.TrainBalance, p.NonEmptyOffDiag, *parts*(*parts-1))
	return nil
}

// writeAtomic writes through a temporary file and a rename, so readers see
// the old file or the new one, never half of one.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

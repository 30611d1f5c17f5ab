package main

import (
	"fmt"
	"strings"

	"sancus/src/graph"
	"sancus/src/scaling"
	"sancus/src/shard"
)

// benchRank replays one rank of a P-rank partition alone (train.Replay):
// its compute an epoch, its rows and nonzeros, the bytes it would send and
// receive, with no MPI and no peers.
func benchRank(args []string) error {
	fs := newFlags("bench rank", "bench rank (--shards DIR | --data DIR --parts P) --rank R [--epochs 5] [model flags] [--out FILE.json]: one rank's epoch of a P-rank partition, run alone")
	shards := fs.String("shards", "", "a prepared shard directory (sancus prepare)")
	data := fs.String("data", "", "a dataset directory, partitioned in memory into --parts")
	parts := fs.Int("parts", 0, "with --data: P")
	rank := fs.Int("rank", 0, "the rank replayed")
	epochs := fs.Int("epochs", 5, "training steps replayed, the first a warm-up")
	out := fs.String("out", "", "also write the figures as JSON")
	mf := addModelFlags(fs)
	pf := addPartitionFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	cfg := mf.config()
	var rb rankBench
	var err error
	switch {
	case (*shards == "") == (*data == ""):
		return fmt.Errorf("give --shards DIR, or --data DIR with --parts P")
	case *shards != "":
		meta, err := shard.ReadMeta(*shards)
		if err != nil {
			return err
		}
		load := func(i int) (*shard.Shard, error) { return shard.Read(*shards, i, meta.Parts) }
		rb, err = replayShards(load, meta.Parts, cfg, *rank, *epochs)
		if err != nil {
			return err
		}
		rb.Data = *shards
	default:
		if *parts < 1 {
			return fmt.Errorf("--data needs --parts P ≥ 1, got %d", *parts)
		}
		ds, err := graph.Load(*data, graph.LoadOptions{NormalizeFeatures: true})
		if err != nil {
			return err
		}
		var part scaling.Partition
		if pf.name == "contiguous" {
			part, err = scaling.Contiguous(scaling.GraphOf(ds), *parts)
		} else {
			part.P = *parts
			part.Parts, _, err = pf.run(*data, *parts)
		}
		if err != nil {
			return err
		}
		if rb, err = replayRank(ds, part, cfg, *rank, *epochs); err != nil {
			return err
		}
		rb.Data = *data
	}
	rb.Command = "sancus bench " + strings.Join(append([]string{"rank"}, args...), " ")
	fmt.Printf("rank %d of %d: %d rows, %d nonzeros of Â; compute %.2f ms an epoch (mean of %d after a warm-up, least %.2f); would send %.3f MB and receive %.3f MB an epoch\n",
		rb.Rank, rb.Ranks, rb.Rows, rb.NNZ, rb.ComputeMs, *epochs-1, rb.MinMs, float64(rb.BytesSent)/1e6, float64(rb.BytesRecv)/1e6)
	if *out != "" {
		err = writeJSON(*out, rb)
	}
	return err
}

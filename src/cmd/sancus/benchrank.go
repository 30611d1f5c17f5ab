package main

import (
	"fmt"
	"strings"

	"sancus/src/graph"
	"sancus/src/scaling"
	"sancus/src/shard"
	"sancus/src/train"
)

// benchRank replays one rank of a P-rank partition alone (train.Replay):
// its compute an epoch, its rows and nonzeros, the bytes it would send and
// receive, with no MPI and no peers.
func benchRank(args []string) error {
	fs := newFlags("bench rank", "bench rank (--shards DIR | --data DIR --parts P) --rank R [--epochs 5] [model flags] [--out FILE.json]: one rank's epoch of a P-rank partition, run alone")
	shards := fs.String("shards", "", "a prepared shard directory (sancus prepare)")
	data := fs.String("data", "", "a dataset directory, partitioned in memory into --parts")
	parts := fs.Int("parts", 0, "with --data: P")
	rank := fs.Int("rank", -1, "the rank replayed (with --data, -1: the one with the most nonzeros of Â)")
	epochs := fs.Int("epochs", 5, "training steps replayed, the first a warm-up")
	out := fs.String("out", "", "also write the figures as JSON to `FILE`")
	var rates scaling.Rates
	fs.Float64Var(&rates.SpMMGflops, "spmm-gflops", 0, "with --data: also predict the rank's compute at these rates (plan's)")
	fs.Float64Var(&rates.GEMMGflops, "gemm-gflops", 0, "with --data: the GEMM rate of the prediction")
	fs.Float64Var(&rates.BlockUs, "block-us", 0, "with --data: the cost a peer block of the prediction, µs")
	fs.Float64Var(&rates.PassNs, "pass-ns", 0, "with --data: the cost each value of a row a peer block's product passes over, ns")
	fs.Float64Var(&rates.ByteNs, "byte-ns", 0, "with --data: the cost a byte of rows packed to send or taken in, ns")
	mf := addModelFlags(fs)
	pf := addPartitionFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := outFile(*out, "the figures' JSON file", "rank.json"); err != nil {
		return err
	}
	cfg := mf.config()
	var rb rankBench
	var err error
	switch {
	case (*shards == "") == (*data == ""):
		return fmt.Errorf("give --shards DIR, or --data DIR with --parts P")
	case *shards != "":
		if *rank < 0 {
			return fmt.Errorf("--shards needs --rank R: the rank to replay")
		}
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
		if !pf.kind.Reorders() {
			part, err = scaling.Contiguous(scaling.GraphOf(ds), *parts)
		} else {
			part.P = *parts
			part.Parts, _, err = pf.run(*data, *parts)
		}
		if err != nil {
			return err
		}
		if *rank < 0 {
			if *rank, err = busiest(scaling.GraphOf(ds), part); err != nil {
				return err
			}
		}
		if rb, err = replayRank(ds, part, cfg, *rank, *epochs); err != nil {
			return err
		}
		rb.Data = *data
		if err := rb.predict(ds, part, cfg, rates); err != nil {
			return err
		}
	}
	rb.Command = "sancus bench " + strings.Join(append([]string{"rank"}, args...), " ")
	fmt.Printf("rank %d of %d: %d rows, %d nonzeros of Â; compute %.2f ms an epoch (least of %d after a warm-up, one kernel thread; median %.2f, mean %.2f); would send %.3f MB and receive %.3f MB an epoch\n",
		rb.Rank, rb.Ranks, rb.Rows, rb.NNZ, rb.MinMs, *epochs-1, rb.MedianMs, rb.ComputeMs, float64(rb.BytesSent)/1e6, float64(rb.BytesRecv)/1e6)
	if rb.Counted != nil {
		fmt.Printf("plan counts %.3f MB sent and %.3f MB received an epoch", float64(rb.Counted.Sent)/1e6, float64(rb.Counted.Recv)/1e6)
		if rb.PredictedMs > 0 {
			fmt.Printf(" and predicts %.2f ms of compute", rb.PredictedMs)
		}
		fmt.Println()
	}
	if *out != "" {
		err = writeJSON(*out, rb)
	}
	return err
}

// busiest is the rank of part with the most nonzeros of Â.
func busiest(g scaling.Graph, part scaling.Partition) (int, error) {
	counts, err := scaling.Count(g, part, 0)
	if err != nil {
		return 0, err
	}
	r := 0
	for i, rk := range counts.Ranks {
		if rk.NNZ > counts.Ranks[r].NNZ {
			r = i
		}
	}
	return r, nil
}

// predict adds what plan counts (and, given rates, predicts) for the
// replayed rank.
func (rb *rankBench) predict(ds *graph.Dataset, part scaling.Partition, cfg train.Config, rates scaling.Rates) error {
	counts, err := scaling.Count(scaling.GraphOf(ds), part, 0)
	if err != nil {
		return err
	}
	m, err := shapeOf(cfg, ds)
	if err != nil {
		return err
	}
	t := scaling.RankTraffic(counts, rb.Rank, m.Flows, m.Params, m.Allreduce)
	rb.Counted = &t
	if rates.SpMMGflops > 0 && rates.GEMMGflops > 0 {
		rb.PredictedMs = m.WorkMoving(counts.Ranks[rb.Rank], t).Seconds(rates) * 1e3
	}
	return nil
}

package train

import (
	"sancus/src/result"

	"errors"
	"time"

	"sancus/collectives"
	"sancus/src/graph"
	"sancus/src/shard"
)

// Outcome is rank 0's report and final parameters of an in-process run.
type Outcome struct {
	Result *result.Result
	Params [][]float32
}

// RunInProcess splits ds into parts shards in memory and trains them as
// parts goroutine ranks over the in-process transport: the same engine and
// algorithm as an mpirun job, without MPI. It returns rank 0's report.
func RunInProcess(ds *graph.Dataset, parts int, cfg Config) (Outcome, error) {
	return RunPartitioned(ds, nil, parts, cfg)
}

// RunPartitioned is RunInProcess on a partition (assign[v] = rank of node
// v; nil: contiguous ranges): nodes are reordered part by part.
func RunPartitioned(ds *graph.Dataset, assign []int32, parts int, cfg Config) (Outcome, error) {
	return runPrepared(ds, parts, cfg, shard.Options{Precompute: cfg.Model.Precompute, Parts: assign})
}

// RunClustered is RunInProcess with the nodes cut into k clusters
// (clusters[v]), whole clusters per rank, for cluster-batch training.
func RunClustered(ds *graph.Dataset, clusters []int32, k, parts int, cfg Config) (Outcome, error) {
	assign, err := shard.ClusterRanks(clusters, k, parts)
	if err != nil {
		return Outcome{}, err
	}
	return runPrepared(ds, parts, cfg, shard.Options{Precompute: cfg.Model.Precompute, Parts: assign, Clusters: clusters, NumClusters: k})
}

func runPrepared(ds *graph.Dataset, parts int, cfg Config, opt shard.Options) (Outcome, error) {
	if err := cfg.Validate(); err != nil {
		return Outcome{}, err
	}
	prep, err := shard.Prepare(ds, parts, opt)
	if err != nil {
		return Outcome{}, err
	}
	shards := make([]*shard.Shard, parts)
	for r := range shards {
		if shards[r], err = prep.Shard(r); err != nil {
			return Outcome{}, err
		}
	}
	return RunShards(shards, cfg)
}

// RunShards trains already-cut shards as goroutine ranks. It takes them:
// their entries are cleared as the ranks take them, so that what a rank's
// engine does not read (the input layer 1 does not multiply) is let go, as
// it is in an MPI rank.
func RunShards(shards []*shard.Shard, cfg Config) (Outcome, error) {
	parts := len(shards)
	results := make([]*result.Result, parts)
	var params [][]float32
	var end error // how rank 0's training ended early, if it did
	err := collectives.NewWorld(parts, 10*time.Minute).Run(func(c collectives.Comm) error {
		s := shards[c.Rank()]
		shards[c.Rank()] = nil
		e, err := New(cfg, c, s)
		if err != nil {
			return err
		}
		defer e.Close()
		results[c.Rank()], err = e.Run()
		if c.Rank() == 0 {
			params = e.Params()
		}
		// A stop request or a divergence ends every rank together with a
		// valid report: not a failure that should abort the world.
		if errors.Is(err, ErrStopped) || errors.Is(err, ErrDiverged) {
			if c.Rank() == 0 {
				end = err
			}
			return nil
		}
		return err
	})
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Result: results[0], Params: params}, end
}

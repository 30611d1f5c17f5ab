package train

import (
	"time"

	"sancus/collectives"
	"sancus/src/graph"
	"sancus/src/shard"
)

// RunInProcess splits ds into parts shards in memory and trains them as
// parts goroutine ranks over the in-process transport: the same engine and
// algorithm as an mpirun job, without MPI. It returns rank 0's report.
func RunInProcess(ds *graph.Dataset, parts int, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	prep, err := shard.Prepare(ds, parts, shard.Options{Precompute: cfg.Precompute})
	if err != nil {
		return nil, err
	}
	shards := make([]*shard.Shard, parts)
	for r := range shards {
		if shards[r], err = prep.Shard(r); err != nil {
			return nil, err
		}
	}
	return RunShards(shards, cfg)
}

// RunShards trains already-cut shards as goroutine ranks.
func RunShards(shards []*shard.Shard, cfg Config) (*Result, error) {
	parts := len(shards)
	results := make([]*Result, parts)
	err := collectives.NewWorld(parts, 10*time.Minute).Run(func(c collectives.Comm) error {
		e, err := New(cfg, c, shards[c.Rank()])
		if err != nil {
			return err
		}
		results[c.Rank()], err = e.Run()
		return err
	})
	if err != nil {
		return nil, err
	}
	return results[0], nil
}

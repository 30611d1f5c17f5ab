package train

import (
	"errors"
	"time"

	"sancus/collectives"
	"sancus/src/result"
	"sancus/src/shard"
)

// Outcome is rank 0's plan, report and final parameters of an in-process run.
type Outcome struct {
	Plan   Plan
	Result *result.Result
	Params [][]float32
	// BestParams are rank 0's parameters after the best validation epoch
	// (nil where the run evaluated none better since it resumed).
	BestParams [][]float32
}

// RunShards trains already-cut shards as goroutine ranks. It takes them:
// their entries are cleared as the ranks take them, so that what a rank's
// engine does not read (the input layer 1 does not multiply) is let go, as
// it is in an MPI rank.
func RunShards(shards []*shard.Shard, cfg Config) (Outcome, error) {
	parts := len(shards)
	if cfg.Run.RanksOnHost == 0 {
		cfg.Run.RanksOnHost = parts // one process: one host's memory
	}
	results := make([]*result.Result, parts)
	var params, best [][]float32
	var plan Plan
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
			params, best, plan = e.Params(), e.BestParams(), e.plan
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
	return Outcome{Plan: plan, Result: results[0], Params: params, BestParams: best}, end
}

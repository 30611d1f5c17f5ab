package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sancus/collectives/mpi"
	"sancus/kernels"
	"sancus/launch"
	"sancus/src/graph"
	"sancus/src/prepare"
	"sancus/src/result"
	"sancus/src/shard"
	"sancus/src/train"
	"strings"
)

// One rank of an mpirun or srun job, and the in-process ranks: the
// drivers that turn a Plan into a run on this process.

// trainMPI runs this process as one rank of an mpirun/srun job. Any error
// aborts the whole job with a message naming the rank, so no rank hangs.
func trainMPI(cfg train.Config, tf trainFlags, rep *result.Run) error {
	launch.PrepareMPI(runtime.NumCPU())
	c, err := mpi.Start(tf.timeout)
	if err != nil {
		return err
	}
	cfg.Run.BaseRSSMB = launch.RSSMB()
	rank, size := c.Rank(), c.Size()
	abort := func(what string, err error) error {
		unlock() // MPI_Abort ends the process: no deferred call runs after it
		c.Abort(fmt.Errorf("%s: %w", what, err))
		return err
	}
	wait, err := shareHost(c, tf.threads, tf.mpiWait)
	if err != nil {
		return abort("sharing the host's cores", err)
	}
	shared, err := train.OneHostSharedMemory(c)
	if err != nil {
		return abort("asking the ranks' hosts", err)
	}
	probes, err := setProgress(c, shared)
	if err != nil {
		return abort("setting MPI's progress", err)
	}
	var s *shard.Shard
	if tf.shards != "" {
		if s, err = shard.Read(tf.shards, rank, size); err != nil {
			return abort("loading shard", err)
		}
		rep.Dataset = shardDataset(tf.shards)
	} else {
		ds, err := graph.Load(tf.data, tf.load)
		if err != nil {
			return abort("loading dataset", err)
		}
		prep, err := prepare.InMemory(ds, size, prepare.Options{Precompute: cfg.Precomputed()})
		if err != nil {
			return abort("partitioning", err)
		}
		if s, err = prep.Shard(rank); err != nil {
			return abort("partitioning", err)
		}
		rep.Dataset = ds.Name
	}
	rep.Nodes = s.N
	cfg.Wire.FromLink = !tf.wireGiven
	plan, err := train.Resolve(cfg, c)
	if err != nil {
		return abort("setting up", err)
	}
	rep.LinkGBs, rep.LinkLatencyUs, rep.WireChosen = plan.Link.GBs, plan.Link.LatencyUs, plan.Link.Chosen
	if rank != 0 {
		cfg.Run.Log = nil
	} else {
		transport := "MPI (" + rep.Launcher + "; waits " + wait.String()
		if !probes {
			transport += "; shared memory, one core a rank: messages move in the waits"
		}
		transport += ")"
		printStart(cfg, size, rep.Dataset, s.N, transport)
		if rep.WireChosen != "" {
			fmt.Fprintf(os.Stderr, "sancus: %s (--wire fp32 keeps every rank count's losses equal)\n", rep.WireChosen)
		}
	}
	e, err := train.NewPlanned(plan, c, s)
	if err != nil {
		return abort("setting up", err)
	}
	defer e.Close()
	// The epochs hold what set-up left and add a little garbage each
	// (request handles, small slices): at the 10% target set-up runs at, a
	// long run's peak kept growing. At 2% the heap stays within 2% of what
	// is live, and a collection every few hundred epochs costs next to
	// nothing.
	debug.SetGCPercent(2)
	res, err := e.Run()
	if err != nil && !errors.Is(err, train.ErrStopped) && !errors.Is(err, train.ErrDiverged) {
		return abort("training", err)
	}
	rep.Config, rep.Result = plan, res
	var sideErr error
	if rank == 0 {
		var ferr error
		if sideErr, ferr = finish(rep, plan, tf, e.Params(), e.BestParams()); ferr != nil {
			return abort("writing results", ferr)
		}
	}
	if berr := c.Barrier(); berr != nil {
		return berr
	}
	if cerr := c.Close(); cerr != nil {
		return cerr
	}
	return ended(err, cfg, res, sideErr)
}

// runInProcess splits ds into parts shards in memory and trains them as
// parts goroutine ranks over the in-process transport: the same engine and
// algorithm as an mpirun job, without MPI. It returns rank 0's report.
func runInProcess(ds *graph.Dataset, parts int, cfg train.Config) (train.Outcome, error) {
	if err := cfg.Validate(); err != nil {
		return train.Outcome{}, err
	}
	prep, err := prepare.InMemory(ds, parts, prepare.Options{Precompute: cfg.Precomputed()})
	if err != nil {
		return train.Outcome{}, err
	}
	shards, err := prep.Shards()
	if err != nil {
		return train.Outcome{}, err
	}
	return train.RunShards(shards, cfg)
}

// setThreads sets the kernel threads of this process (launch.Threads
// chooses; onHost: the MPI ranks sharing its cores, launch.Sharing's, 0
// for in-process ranks).
func setThreads(flag, inProcessRanks, onHost int) {
	kernels.SetThreads(launch.Threads(flag, inProcessRanks, onHost))
	useProcs(max(1, inProcessRanks))
}

// shareHost sets this rank's kernel threads (flag: --threads) and how its
// MPI thread waits (w, resolved) for the ranks that share its cores
// (launch.Sharing), and returns the wait.
func shareHost(c *mpi.Comm, flag int, w launch.Wait) (launch.Wait, error) {
	host, err := launch.Sharing(c.LocalSize(), c.Size())
	if err != nil {
		return w, err
	}
	setThreads(flag, 0, host.Ranks)
	w = w.Resolve(host)
	return w, c.SetNap(w.Nap())
}

// useProcs sets GOMAXPROCS past the goroutines that ranks (in this
// process) keep in kernel calls at once (launch.Procs). After the threads
// are chosen: launch.Threads reads GOMAXPROCS.
func useProcs(ranks int) {
	runtime.GOMAXPROCS(launch.Procs(ranks*kernels.Threads(), runtime.GOMAXPROCS(0)))
}

// setProgress stops c's MPI thread probing while transfers are in flight
// where launch.ProbesMPI says it would only take time from the compute
// (shared: oneHostSharedMemory's answer), and reports whether it probes.
func setProgress(c *mpi.Comm, shared bool) (bool, error) {
	if launch.ProbesMPI(kernels.Threads(), shared) {
		return true, nil
	}
	return false, c.SetProgress(0)
}

func printStart(cfg train.Config, ranks int, name string, n int, transport string) {
	if cfg.Run.Log == nil {
		return
	}
	fmt.Fprintf(cfg.Run.Log, "sancus: training %d-layer %s (hidden %d) on %s (%d nodes), %d rank(s) over %s, staleness %s, %s kernels, %d threads\n",
		cfg.Model.Layers, strings.ToUpper(cfg.Model.Arch.String()), cfg.Model.Hidden, name, n, ranks, transport, cfg.Staleness.Policy, kernels.SIMD(), kernels.Threads())
}

package main

import (
	"errors"
	"fmt"
	"os"
	"sancus/launch"
	"sancus/src/atomicfile"
	"sancus/src/result"
	"sancus/src/train"
)

// A run's outputs: checked and locked before any work, and how a stop or
// a divergence becomes the exit status once they are written.

// checkOutputs creates and test-writes every output location. write says
// whether this process writes the results (rank 0); every rank writes
// checkpoints.
func checkOutputs(cfg train.Config, tf trainFlags, write bool) error {
	if cfg.Run.CheckpointDir != "" {
		if err := atomicfile.CheckDir(cfg.Run.CheckpointDir); err != nil {
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
	}
	if !write {
		return nil
	}
	if err := atomicfile.Check(tf.out); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for flag, path := range map[string]string{"--save-weights": tf.saveWeights, "--save-model": tf.saveModel} {
		if path == "" {
			continue
		}
		if err := atomicfile.Check(path); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return nil
}

// lockOutputs takes the results path and the checkpoint directory for
// this run: a second run on either is refused at start, naming this one.
func lockOutputs(cfg train.Config, tf trainFlags) (release func(), err error) {
	paths := []string{tf.out}
	if cfg.Run.CheckpointDir != "" {
		paths = append(paths, cfg.Run.CheckpointDir)
	}
	var held []func()
	release = func() {
		for _, r := range held {
			r()
		}
	}
	for _, p := range paths {
		r, err := atomicfile.Lock(p)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, r)
	}
	return release, nil
}

// exitUnlocked releases the output locks and exits.
func exitUnlocked(code int) {
	unlock()
	os.Exit(code)
}

// unlock releases the output locks; ended calls it before an exit that
// skips deferred calls.
var unlock = func() {}

// ended turns how training ended into the exit status: a honoured stop
// request exits 85 (requeue), a divergence 86, both after the report.
func ended(err error, cfg train.Config, res *result.Result, sideErr error) error {
	if errors.Is(err, train.ErrDiverged) {
		fmt.Fprintf(os.Stderr, "sancus: the results JSON has the curve up to the divergence (status \"diverged\"); exiting %d\n", launch.ExitDiverged)
		exitUnlocked(launch.ExitDiverged)
	}
	if !errors.Is(err, train.ErrStopped) {
		return sideErr // completed: a failed side write still fails the run
	}
	if cfg.Run.CheckpointDir == "" {
		fmt.Fprintln(os.Stderr, "sancus: stopped by signal without --checkpoint-dir: progress is lost")
		exitUnlocked(1)
	}
	if last := len(res.Curve); res.Checkpoint == last {
		fmt.Fprintf(os.Stderr, "sancus: checkpoint committed in %s; exiting %d so the job can be requeued and --resume\n", cfg.Run.CheckpointDir, launch.ExitRequeue)
	} else {
		fmt.Fprintf(os.Stderr, "sancus: stopped after epoch %d, but its checkpoint failed: --resume continues after epoch %d from %s; exiting %d\n",
			last, res.Checkpoint, cfg.Run.CheckpointDir, launch.ExitRequeue)
	}
	exitUnlocked(launch.ExitRequeue)
	return nil
}

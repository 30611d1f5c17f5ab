package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"sancus/launch"
	"sancus/src/shard"
)

func runLaunch(args []string) error {
	fs := newFlags("launch", "launch -n N [--via srun|mpirun] -- <sancus command and flags>")
	np := fs.IntP("ranks", "n", 1, "number of ranks")
	via := fs.String("via", "", "launcher: srun or mpirun (default: srun inside a Slurm allocation, else mpirun)")
	if err := fs.Parse(args); err != nil {
		if strings.HasPrefix(err.Error(), "unknown flag") {
			return fmt.Errorf("%w: a command's flags go after -- (sancus launch -n 2 -- train --data DIR)", err)
		}
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("nothing to launch: give a sancus command after --")
	}
	if err := launchable(fs.Args()); err != nil {
		return err
	}
	if err := shardsFit(fs.Args(), *np); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd, err := launch.Command(*via, *np, self, fs.Args()...)
	if err != nil {
		return err
	}
	removeSession, err := launch.OwnSessionDir(cmd)
	if err != nil {
		return err
	}
	defer removeSession()
	fmt.Fprintf(os.Stderr, "sancus launch: %v\n", cmd.Args)
	// The launcher runs in a process group of its own, so a ^C at the
	// terminal reaches this process alone (mpirun aborts the job on one),
	// and it gets the stop signal if this process dies.
	stop := launch.StopSignal(cmd.Path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: stop.(syscall.Signal)}
	if err := cmd.Start(); err != nil {
		return err
	}
	// A SIGTERM, SIGUSR1 (a walltime warning) or ^C becomes the launcher's
	// stop signal (SIGUSR1 for mpirun): every rank finishes its epoch,
	// checkpoints and exits 85. A second one is passed on as it is, which
	// aborts the job.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	go func() {
		for s := range sigs {
			fmt.Fprintf(os.Stderr, "sancus launch: %v: asking the ranks to checkpoint and stop (%v)\n", s, stop)
			cmd.Process.Signal(stop)
			stop = s
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		removeSession()
		os.Exit(ee.ExitCode()) // keep the job's status (85 = checkpointed, requeue)
	}
	return err
}

// launchable refuses, before any rank starts, an inner command that would
// fail on every rank at once: one that is not sancus's, one that runs in
// a single process, or a rank count given twice.
func launchable(args []string) error {
	name := args[0]
	switch name {
	case "train", "predict", "bench":
	case "launch":
		return fmt.Errorf("the ranks would each launch a job of their own: give the command to run on every rank (train, predict or bench) after --")
	default:
		if _, ok := findCommand(name); ok {
			return fmt.Errorf("%s runs in one process: run 'sancus %s' directly (under MPI: train, predict or bench)", name, name)
		}
		return fmt.Errorf("%q is not a sancus command%s (under MPI: train, predict or bench)", name, closestCommand(name))
	}
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "--ranks" || strings.HasPrefix(a, "--ranks=") {
			return fmt.Errorf("drop --ranks from the %s command: launch -n sets how many ranks run", name)
		}
	}
	return nil
}

// shardsFit refuses shards prepared for another rank count before any
// rank starts: every rank would fail at once on a shard file that is not
// there.
func shardsFit(args []string, np int) error {
	for i, a := range args[1:] {
		dir, ok := strings.CutPrefix(a, "--shards=")
		if a == "--shards" && i+2 < len(args) {
			dir, ok = args[i+2], true
		}
		if a == "--" {
			return nil
		}
		if !ok {
			continue
		}
		m, err := shard.OpenDir(dir)
		if err != nil {
			return err
		}
		if m.Parts != np {
			return fmt.Errorf("--shards %s holds %d parts, for %d ranks, not -n %d: launch -n %d, or sancus prepare --parts %d", dir, m.Parts, m.Parts, np, m.Parts, np)
		}
	}
	return nil
}

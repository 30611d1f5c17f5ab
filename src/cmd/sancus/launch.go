package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"sancus/launch"
)

func init() {
	register("launch", "start sancus on N ranks with srun (inside Slurm) or mpirun, with the right flags", runLaunch)
}

func runLaunch(args []string) error {
	fs := newFlags("launch", "launch -n N [--via srun|mpirun] -- <sancus command and flags>")
	np := fs.IntP("ranks", "n", 1, "number of ranks")
	via := fs.String("via", "", "launcher: srun or mpirun (default: srun inside a Slurm allocation, else mpirun)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("nothing to launch: give a sancus command after --")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd, err := launch.Command(*via, *np, self, fs.Args()...)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "sancus launch: %v\n", cmd.Args)
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode()) // keep the job's status (85 = checkpointed, requeue)
	}
	return err
}

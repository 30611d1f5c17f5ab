// Command sancus trains graph neural networks on whole graphs across MPI
// ranks with the SANCUS skip-broadcast algorithm.
//
//	sancus gen       generate a synthetic dataset (planted partition, R-MAT)
//	sancus prepare   split a dataset into one shard per rank
//	sancus train     train a GCN (one process, --ranks N goroutines, or under mpirun/srun)
//	sancus bench     kernel and communication benchmarks
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

type command struct {
	name, summary string
	run           func(args []string) error
}

var commands []command

func register(name, summary string, run func(args []string) error) {
	commands = append(commands, command{name, summary, run})
}

func usage() {
	fmt.Fprintf(os.Stderr, "sancus: full-graph GNN training on HPC clusters\n\nUsage: sancus <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(os.Stderr, "\nRun 'sancus <command> --help' for a command's flags.\n")
}

// newFlags makes a flag set whose --help prints the command's usage.
func newFlags(name, synopsis string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: sancus %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			err := c.run(os.Args[2:])
			if errors.Is(err, pflag.ErrHelp) {
				return
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sancus %s: %v\n", c.name, err)
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "sancus: unknown command %q\n\n", os.Args[1])
	usage()
	os.Exit(2)
}

// noArgs rejects stray positional arguments (a typo'd flag value, usually).
func noArgs(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

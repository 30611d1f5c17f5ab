// Command sancus trains graph neural networks on whole graphs across MPI
// ranks with the SANCUS skip-broadcast algorithm.
//
//	sancus gen       generate a synthetic dataset (planted partition, R-MAT)
//	sancus prepare   split a dataset into one shard per rank
//	sancus train     train a GNN (one process, --ranks N goroutines, or under mpirun/srun)
//	sancus bench     kernel and communication benchmarks
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"sancus/launch"

	"github.com/spf13/pflag"
)

type command struct {
	name, summary string
	run           func(args []string) error
}

// commands are sancus's commands, in the order the help lists them: the
// table is the whole set, named here rather than assembled by each file's
// init.
func commands() []command {
	return []command{
		{"train", "train a GNN: GCN, GraphSAGE or GAT (one process, --ranks N in-process, or as mpirun/srun ranks)", runTrain},
		{"prepare", "split a dataset into one shard file per rank", runPrepare},
		{"launch", "start sancus on N ranks with srun (inside Slurm) or mpirun, with the right flags", runLaunch},
		{"predict", "full-graph inference with a saved model (one process, --ranks N, or mpirun/srun ranks)", runPredict},
		{"info", "say what a dataset, shard directory, model file or checkpoint directory holds, and check it whole", runInfo},
		{"report", "aggregate result JSONs into a CSV table and PNG charts (runs sancus-report)", runReport},
		{"plan", "predict, before submitting, a cluster's epoch, bytes, messages and memory per rank for P = 1, 2, 4 …", runPlan},
		{"gen", "generate a synthetic dataset directory", runGen},
		{"partition-stats", "partition a graph and print edge cut, replication, balance, locality, time and memory", runPartitionStats},
		{"export-metis", "write a dataset's graph as a METIS graph file (for gpmetis)", runExportMetis},
		{"bench", "benchmarks: 'bench kernels' (one rank), 'bench comm' (under mpirun), 'bench rank' (one rank of P, alone)", runBench},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "sancus: full-graph GNN training on HPC clusters\n\nUsage: sancus <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'sancus <command> --help' for a command's flags.\n")
	fmt.Fprintf(w, "Exit status: 0 done, 1 error, 2 no or an unknown command, %d stopped by a signal after a checkpoint (requeue and --resume), %d training diverged.\n",
		launch.ExitRequeue, launch.ExitDiverged)
}

// help prints the usage of the flag set whose --help was given. pflag calls
// a set's Usage both for --help and on a parse error; only main knows which
// (ErrHelp), so Usage just records the set and main prints it: help on
// stdout with status 0, errors on stderr with status 1.
var help func(w io.Writer)

// parsed is the command's flag set (the last one made), for a "did you
// mean" on an unknown flag.
var parsed *pflag.FlagSet

// newFlags makes a command's flag set.
func newFlags(name, synopsis string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	return withUsage(fs, func(w io.Writer) {
		fmt.Fprintf(w, "Usage: sancus %s\n\n", synopsis)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	})
}

// withUsage makes print a set's --help.
func withUsage(fs *pflag.FlagSet, print func(w io.Writer)) *pflag.FlagSet {
	fs.SortFlags = false
	fs.SetOutput(io.Discard) // errors are returned and printed once, by main
	fs.Usage = func() { help = print }
	parsed = fs
	return fs
}

// grouped is a command's flags in sections, printed under their titles
// in the order they were made.
type grouped struct {
	fs       *pflag.FlagSet
	titles   []string
	sections []*pflag.FlagSet
}

// newGrouped makes a command's flag set whose help shows the synopsis, an
// example and each section.
func newGrouped(name, synopsis, example string) *grouped {
	g := &grouped{fs: pflag.NewFlagSet(name, pflag.ContinueOnError)}
	g.fs.SortFlags = false
	withUsage(g.fs, func(w io.Writer) {
		fmt.Fprintf(w, "Usage: sancus %s\n\nExample:\n  %s\n", synopsis, example)
		for i, s := range g.sections {
			fmt.Fprintf(w, "\n%s:\n%s", g.titles[i], s.FlagUsages())
		}
	})
	return g
}

// section starts a section of flags.
func (g *grouped) section(title string) *pflag.FlagSet {
	s := pflag.NewFlagSet(title, pflag.ContinueOnError)
	s.SortFlags = false
	g.titles, g.sections = append(g.titles, title), append(g.sections, s)
	return s
}

// done adds every section's flags to the set that parses them.
func (g *grouped) done() *pflag.FlagSet {
	for _, s := range g.sections {
		g.fs.AddFlagSet(s)
	}
	return g.fs
}

func main() {
	useBuild()
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	if a := os.Args[1]; a == "-h" || a == "--help" || a == "help" {
		usage(os.Stdout)
		return
	}
	if c, ok := findCommand(os.Args[1]); ok {
		err := c.run(os.Args[2:])
		if errors.Is(err, pflag.ErrHelp) && help != nil {
			help(os.Stdout)
			return
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "sancus %s: %v%s\n", c.name, err, didYouMean(err, parsed))
			os.Exit(1)
		}
		return
	}
	fmt.Fprintf(os.Stderr, "sancus: unknown command %q%s\n\n", os.Args[1], closestCommand(os.Args[1]))
	usage(os.Stderr)
	os.Exit(2)
}

// findCommand is the command called name.
func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// closestCommand is " (did you mean NAME?)" for the command nearest to
// an unknown name, or "".
func closestCommand(name string) string {
	best, dist := "", 3
	for _, c := range commands() {
		if d := editDistance(name, c.name); d < dist {
			best, dist = c.name, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// noArgs rejects stray positional arguments (a typo'd flag value, usually).
func noArgs(fs *pflag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// didYouMean names the flag of fs closest to an unknown one, where one is
// close: a typo, or a prefix of it (--epoch for --epochs).
func didYouMean(err error, fs *pflag.FlagSet) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok || fs == nil {
		return ""
	}
	best, dist := "", 3
	fs.VisitAll(func(f *pflag.Flag) {
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) || strings.HasPrefix(name, f.Name) {
			d = min(d, 1)
		}
		if d < dist {
			best, dist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return " (did you mean --" + best + "?)"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

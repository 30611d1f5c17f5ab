// Command sancus-report aggregates training result JSONs into a CSV table
// and PNG charts: what `sancus report` runs. It is a binary of its own so
// that training ranks do not carry gonum/plot (package charts).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"sancus/src/report"
	"sancus/src/report/charts"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "sancus report: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := pflag.NewFlagSet("sancus report", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sancus report [--out DIR] RESULTS...  (files or directories of result JSONs)\n\n")
		fs.PrintDefaults()
	}
	out := fs.String("out", "", "`DIR` to write summary.csv and the PNGs (default: the first argument if a directory)")
	fs.SetOutput(io.Discard) // an error is printed once, by main
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) { // help on stdout, status 0
			fs.SetOutput(os.Stdout)
			fs.Usage()
		}
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("give result JSON files or directories")
	}
	dir := *out
	if dir == "" {
		if st, err := os.Stat(fs.Arg(0)); err == nil && st.IsDir() {
			dir = fs.Arg(0)
		} else {
			dir = filepath.Dir(fs.Arg(0))
		}
	}
	runs, err := report.Load(fs.Args()...)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("no training results in %v", fs.Args())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rows := report.Summarize(runs)
	csvPath := filepath.Join(dir, "summary.csv")
	if err := report.WriteCSV(csvPath, rows); err != nil {
		return err
	}
	width := len("run")
	for _, r := range rows {
		width = max(width, len(report.Label(r.Run)))
	}
	fmt.Printf("%-*s %9s %12s %8s %8s\n", width, "run", "ms/epoch", "MB/rank/ep", "skipped", "test")
	for _, r := range rows {
		fmt.Printf("%-*s %9.2f %12.3f %7.0f%% %8.4f\n", width, report.Label(r.Run), r.MsPerEpoch, r.MBSentPerEpoch, 100*r.SkippedFraction, r.TestAcc)
	}
	fmt.Println(report.EpochTime)
	pngs, err := charts.Write(dir, runs)
	if err != nil {
		return err
	}
	fmt.Printf("table: %s\n", csvPath)
	for _, p := range pngs {
		fmt.Printf("plot:  %s\n", p)
	}
	return nil
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// runReport hands over to sancus-report, built next to this binary: the
// charts link gonum/plot, whose start-up (a dozen fonts parsed) would
// otherwise cost every training rank 5.6 MB of resident memory.
func runReport(args []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("report: finding this binary: %w", err)
	}
	helper := filepath.Join(filepath.Dir(self), "sancus-report")
	if _, err := os.Stat(helper); err != nil {
		return fmt.Errorf("report is drawn by sancus-report, built next to sancus by make build (or go build -o %s ./src/cmd/sancus-report): %w", helper, err)
	}
	return syscall.Exec(helper, append([]string{helper}, args...), os.Environ())
}

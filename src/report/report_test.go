package report

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO named like a result JSON in a report directory is refused at
// once, not waited on; other files beside it are read as before.
func TestLoadRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bench.json"), []byte(`{"table": []}`), 0o644)
	if runs, err := Load(dir); err != nil || len(runs) != 0 {
		t.Fatalf("a directory without results: %v, %d runs", err, len(runs))
	}
	fifo := filepath.Join(dir, "sub", "run.json")
	os.Mkdir(filepath.Dir(fifo), 0o755)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "run.json: a FIFO, not a regular file") {
			t.Fatalf("got %v", err)
		}
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("reading a FIFO as a result JSON blocked")
	}
}

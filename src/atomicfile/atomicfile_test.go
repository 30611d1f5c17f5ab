package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesOnlyOnSuccess(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteBytes(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	err := Write(p, func(w io.Writer) error {
		w.Write([]byte("half"))
		return errors.New("disk full")
	})
	if err == nil {
		t.Fatal("failure not reported")
	}
	b, _ := os.ReadFile(p)
	if string(b) != "old" {
		t.Fatalf("file became %q after a failed write", b)
	}
	if _, err := os.Stat(p + ".tmp"); err == nil {
		t.Fatal("temporary file left behind")
	}
}

// A directory given as the file path fails and leaves no temporary file
// (issue 15: `--out DIR` left out.tmp behind).
func TestWriteOverDirectoryLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out")
	os.Mkdir(p, 0o755)
	if err := WriteBytes(p, []byte("x")); err == nil {
		t.Fatal("writing over a directory succeeded")
	}
	if _, err := os.Stat(p + ".tmp"); err == nil {
		t.Fatal("temporary file left behind")
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	if err := Check(filepath.Join(dir, "a", "b", "r.json")); err != nil {
		t.Fatalf("a writable path: %v", err)
	}
	if err := Check(dir); err == nil {
		t.Fatal("a directory passed as a file path")
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	if err := Check(filepath.Join(file, "r.json")); err == nil {
		t.Fatal("a path under a regular file passed")
	}
	if err := CheckDir(filepath.Join(file, "ck")); err == nil {
		t.Fatal("a checkpoint directory under a regular file passed")
	}
	if err := Check("/proc/sancus-test/r.json"); err == nil {
		t.Fatal("a path under /proc passed")
	}
	left, _ := filepath.Glob(filepath.Join(dir, "a", "b", ".*"))
	if len(left) != 0 {
		t.Fatalf("probe files left behind: %v", left)
	}
}

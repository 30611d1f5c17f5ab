package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	if left, _ := filepath.Glob(p + ".*.tmp"); len(left) != 0 {
		t.Fatalf("temporary file left behind: %v", left)
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
	if left, _ := filepath.Glob(p + ".*.tmp"); len(left) != 0 {
		t.Fatalf("temporary file left behind: %v", left)
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

// A FIFO or a device at the path is refused and left as it is; a symlink
// is written through, its target getting the content.
func TestWriteKeepsWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	if err := WriteBytes(fifo, []byte("x")); err == nil || !strings.Contains(err.Error(), "a FIFO") {
		t.Fatalf("writing over a FIFO: %v", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO became %v (%v)", fi.Mode(), err)
	}
	if err := WriteBytes("/dev/null", []byte("x")); err == nil || !strings.Contains(err.Error(), "a device") {
		t.Fatalf("writing over /dev/null: %v", err)
	}
	target, link := filepath.Join(dir, "target.json"), filepath.Join(dir, "link.json")
	os.WriteFile(target, []byte("old"), 0o600)
	os.Symlink("target.json", link)
	if err := WriteBytes(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Fatalf("the symlink's target holds %q", b)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced by a file")
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Fatalf("the target's mode became %v", fi.Mode().Perm())
	}
}

// Writers of one path at once each leave a complete file: temporary names
// do not collide.
func TestConcurrentWritersDoNotCollide(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.json")
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			var err error
			for range 20 {
				if err = WriteBytes(p, []byte(strings.Repeat(string(rune('a'+w)), 1000))); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(p)
	if len(b) != 1000 || strings.Count(string(b), string(b[0])) != 1000 {
		t.Fatalf("a mixed or partial file: %d bytes", len(b))
	}
	if left, _ := filepath.Glob(p + ".*.tmp"); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// A second lock on a path is refused, naming the holder; the first one's
// release frees it, and takes its lock file along.
func TestLock(t *testing.T) {
	for _, p := range []string{filepath.Join(t.TempDir(), "r.json"), t.TempDir()} {
		release, err := Lock(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Lock(p); err == nil || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
			t.Fatalf("a second lock on %s: %v", p, err)
		}
		release()
		again, err := Lock(p)
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		again()
		for _, lock := range []string{p + ".lock", filepath.Join(p, ".lock")} {
			if _, err := os.Stat(lock); err == nil {
				t.Fatalf("lock file %s left", lock)
			}
		}
	}
}

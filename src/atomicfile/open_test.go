package atomicfile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Open refuses what is not a regular file at once: a FIFO without a
// writer would block a reader forever.
func TestOpenRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "a FIFO, not a regular file"},
		{dir, "a directory, not a regular file"},
		{"/dev/null", "a device, not a regular file"},
	} {
		done := make(chan error, 1)
		go func() {
			f, err := Open(c.path)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("%s: got %v, want %q", c.path, err, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("opening %s blocked", c.path)
		}
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("hello"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(file, link)
	f, err := Open(link)
	if err != nil {
		t.Fatalf("a symlink to a regular file: %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "hello" {
		t.Fatalf("read %q", b)
	}
	if _, err := Open(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	if _, err := ReadAll(file, 4); err == nil || !strings.Contains(err.Error(), "more than the 4 ") {
		t.Fatalf("a file over the limit: %v", err)
	}
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

// OpenText names compression by magic, gunzips a .gz and says when its
// stream was cut short.
func TestOpenTextCompression(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("0 1\n", 10000)
	read := func(name string, body []byte) (string, error) {
		p := filepath.Join(dir, name)
		os.WriteFile(p, body, 0o644)
		r, err := OpenText(p)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}
	if got, err := read("plain.txt", []byte(text)); err != nil || got != text {
		t.Fatalf("plain text: %v", err)
	}
	if got, err := read("edges.txt.gz", gzipped(text)); err != nil || got != text {
		t.Fatalf("gzip: %v", err)
	}
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"graph.mtx", gzipped(text), "graph.mtx: gzip-compressed, not plain text"},
		{"x.txt", []byte("\xfd7zXZ\x00rest"), "x.txt: xz-compressed"},
		{"cut.csv.gz", gzipped(text)[:60], "truncated gzip stream"},
		{"head.csv.gz", gzipped(text)[:5], "truncated gzip stream"},
		{"plain.csv.gz", []byte(text), "named .gz but not gzip-compressed"},
	} {
		_, err := read(c.name, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	if Compression([]byte("PK\x03\x04")) != "zip" || Compression([]byte("%%Matrix")) != "" {
		t.Fatal("Compression misnames a magic")
	}
}

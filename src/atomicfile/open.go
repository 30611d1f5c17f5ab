package atomicfile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// Every input sancus reads opens here. Open refuses what is not a regular
// file: a FIFO would block the reader forever, a device never ends, and
// a directory is a mistake named too late. OpenText also refuses a
// compressed file where plain text is expected, and gunzips a .gz one,
// telling a stream cut short from a corrupt one.

// Open opens path for reading if it is a regular file (a symlink to one
// will do). A FIFO is opened without waiting for a writer, then refused.
func Open(path string) (*os.File, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, fmt.Errorf("%s: %s, not a regular file: give the file itself (sancus reads its inputs whole, and a pipe or device may never end)", path, kindOf(st.Mode))
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func kindOf(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "a directory"
	case syscall.S_IFIFO:
		return "a FIFO"
	case syscall.S_IFSOCK:
		return "a socket"
	case syscall.S_IFCHR, syscall.S_IFBLK:
		return "a device"
	}
	return "not a regular file"
}

// ReadAll reads a regular file whole, refusing one larger than limit
// bytes (what the caller's format can plausibly hold).
func ReadAll(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d bytes this kind of file holds: is it the right file?", path, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than the %d bytes this kind of file holds: is it the right file?", path, limit)
	}
	return b, nil
}

// Compression names the compressed format whose magic head begins with
// ("" if none): a reader can say what a file is instead of quoting it.
func Compression(head []byte) string {
	for _, m := range []struct {
		magic, name string
	}{
		{"\x1f\x8b", "gzip"},
		{"\xfd7zXZ\x00", "xz"},
		{"BZh", "bzip2"},
		{"\x28\xb5\x2f\xfd", "zstd"},
		{"PK\x03\x04", "zip"},
	} {
		if bytes.HasPrefix(head, []byte(m.magic)) {
			return m.name
		}
	}
	return ""
}

// OpenText opens a text file: a name ending in .gz is gunzipped (and
// must be gzip); any other name must not be compressed. A gzip stream
// that ends early reads as an error saying so.
func OpenText(path string) (io.ReadCloser, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	head, _ := br.Peek(6)
	kind := Compression(head)
	if !strings.HasSuffix(path, ".gz") {
		if kind != "" {
			f.Close()
			return nil, fmt.Errorf("%s: %s-compressed, not plain text: decompress it first", path, kind)
		}
		return readCloser{br, f}, nil
	}
	if kind != "gzip" {
		f.Close()
		what := "plain text or another format"
		if kind != "" {
			what = kind + "-compressed"
		}
		return nil, fmt.Errorf("%s: named .gz but not gzip-compressed (%s): rename it or compress it with gzip", path, what)
	}
	z, err := gzip.NewReader(br)
	if err != nil {
		f.Close()
		return nil, gzipError(path, err)
	}
	return readCloser{gzipReader{z}, f}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// gzipReader names a gzip stream's failures after the file.
type gzipReader struct{ z *gzip.Reader }

func (g gzipReader) Read(p []byte) (int, error) {
	n, err := g.z.Read(p)
	if err != nil && err != io.EOF {
		err = gzipError("", err) // the reader adds the file and line
	}
	return n, err
}

// ErrTruncated marks a compressed stream that ends before its end.
var ErrTruncated = errors.New("truncated gzip stream")

func gzipError(path string, err error) error {
	if path != "" {
		path += ": "
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%s%w: the file ends mid-stream (an interrupted download or copy?): fetch it again", path, ErrTruncated)
	}
	return fmt.Errorf("%scorrupt gzip stream (%v): fetch it again", path, err)
}

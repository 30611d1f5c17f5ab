// Package atomicfile writes files so that readers (and a job restarted
// after a crash or a full disk) see the old file or the complete new one,
// never half of one: write to path.tmp, fsync, rename.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates path with what fill writes (buffered).
func Write(path string, fill func(w io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp) // the old file, if any, is untouched
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Check makes sure path can be written later: it creates the parent
// directories and test-writes a temporary file beside it, so a run learns
// before hours of work, not after, that its output has nowhere to go.
func Check(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory, not a file path", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("cannot create the directory of %s: %w", path, err)
	}
	return probe(filepath.Dir(path), filepath.Base(path))
}

// CheckDir is Check for a directory that files will be written into.
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create directory %s: %w", dir, err)
	}
	return probe(dir, ".sancus-write-test")
}

func probe(dir, name string) error {
	f, err := os.CreateTemp(dir, "."+name+".probe-*")
	if err != nil {
		return fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	_, err = f.Write(make([]byte, 4096)) // a full disk fails here, not at Create
	if serr := f.Sync(); err == nil {
		err = serr
	}
	f.Close()
	os.Remove(f.Name())
	if err != nil {
		return fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	return nil
}

// WriteBytes creates path holding b.
func WriteBytes(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

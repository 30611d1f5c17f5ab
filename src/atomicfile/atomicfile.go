// Package atomicfile writes files so that readers (and a job restarted
// after a crash or a full disk) see the old file or the complete new one,
// never half of one: write to path.tmp, fsync, rename.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
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
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// WriteBytes creates path holding b.
func WriteBytes(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

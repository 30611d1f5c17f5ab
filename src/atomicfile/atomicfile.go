// Package atomicfile writes files so that readers (and a job restarted
// after a crash or a full disk) see the old file or the complete new one,
// never half of one: write to a temporary file beside it, fsync, rename,
// fsync the directory. It never replaces what is not a regular file, and
// two runs cannot write one path at once (Lock). Inputs open here too
// (Open, OpenText), refused unless they are regular files.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Write creates path with what fill writes (buffered). A symlink at path
// is written through: its target gets the new content. A path that exists
// and is not a regular file (a directory, device, FIFO or socket) is
// refused, untouched.
func Write(path string, fill func(w io.Writer) error) error {
	target, mode, err := resolve(path)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(target)
	f, err := os.CreateTemp(dir, fmt.Sprintf("%s.%d.*.tmp", base, os.Getpid()))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	w := bufio.NewWriterSize(f, 1<<20)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		os.Remove(tmp) // the old file, if any, is untouched
		return fmt.Errorf("writing %s: %w", path, err)
	}
	syncDir(filepath.Dir(target))
	return nil
}

// resolve is where Write puts path's content, and with what permissions:
// path itself (a new file: 0644), or a symlink's final target, keeping an
// existing file's mode.
func resolve(path string) (string, fs.FileMode, error) {
	target := path
	for range 40 { // as the kernel's limit on a chain of links
		fi, err := os.Lstat(target)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return target, 0o644, nil
		case err != nil:
			return "", 0, fmt.Errorf("writing %s: %w", path, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(target)
			if err != nil {
				return "", 0, fmt.Errorf("writing %s: %w", path, err)
			}
			if !filepath.IsAbs(link) {
				link = filepath.Join(filepath.Dir(target), link)
			}
			target = link
		case !fi.Mode().IsRegular():
			return "", 0, fmt.Errorf("writing %s: it exists and is not a regular file (%s): refusing to replace it", path, kind(fi.Mode()))
		default:
			return target, fi.Mode().Perm(), nil
		}
	}
	return "", 0, fmt.Errorf("writing %s: too many levels of symbolic links", path)
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// syncDir makes a rename in dir durable (best effort: some file systems
// refuse to sync a directory).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Check makes sure path can be written later: it creates the parent
// directories and test-writes a temporary file beside it, so a run learns
// before hours of work, not after, that its output has nowhere to go.
func Check(path string) error {
	target, _, err := resolve(path)
	if err != nil {
		if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
			return fmt.Errorf("%s is a directory, not a file path", path)
		}
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("cannot create the directory of %s: %w", path, err)
	}
	return probe(filepath.Dir(target), filepath.Base(target))
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

// Lock takes path for this process until release: an exclusive flock on a
// lock file beside it (a directory's inside it), holding this process's
// pid. A second process asking for the same path is refused at once,
// naming the holder. The lock ends with the process, however it ends.
func Lock(path string) (release func(), err error) {
	lock := path + ".lock"
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		lock = filepath.Join(path, ".lock")
	}
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(f)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if _, perr := strconv.Atoi(holder); perr != nil {
			holder = "another process"
		} else {
			holder = "process " + holder
		}
		return nil, fmt.Errorf("%s is in use by %s (lock %s): one run per output and checkpoint directory", path, holder, lock)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	var once sync.Once
	return func() {
		once.Do(func() {
			os.Remove(lock) // before unlocking: a waiter never takes a file about to vanish
			f.Close()
		})
	}, nil
}

package graph

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"codeberg.org/sbinet/npyio/npy"
	"codeberg.org/sbinet/npyio/npz"
)

// NumPy arrays are read with npyio's header parser and decoded here, in
// chunks: an edge array is never held whole. Errors name the file and the
// array.

// npyArray is one NumPy array opened for reading.
type npyArray struct {
	where string // "cora.npz: adj_indices" or "labels.npy"
	kind  byte   // 'i', 'u', 'f' or 'b'
	size  int    // bytes per element
	shape []int
	r     *bufio.Reader
	c     io.Closer
}

func newNPYArray(where string, rc io.ReadCloser) (*npyArray, error) {
	h, err := npy.NewReader(rc)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: not a NumPy array: %w", where, err)
	}
	a := &npyArray{where: where, shape: h.Header.Descr.Shape, c: rc, r: bufio.NewReaderSize(rc, 1<<20)}
	t := strings.Trim(h.Header.Descr.Type, "'\"")
	if len(t) < 3 || (t[0] != '<' && t[0] != '|' && t[0] != '=') || !strings.ContainsRune("iufb", rune(t[1])) {
		rc.Close()
		return nil, fmt.Errorf("%s: dtype %q is not a little-endian number", where, t)
	}
	a.kind = t[1]
	fmt.Sscanf(t[2:], "%d", &a.size)
	if h.Header.Descr.Fortran && len(a.shape) > 1 {
		rc.Close()
		return nil, fmt.Errorf("%s: Fortran-ordered arrays are not supported (save it C-ordered)", where)
	}
	switch a.size {
	case 1, 2, 4, 8:
	default:
		rc.Close()
		return nil, fmt.Errorf("%s: dtype %q has an unsupported element size", where, t)
	}
	if a.kind == 'f' && a.size < 4 {
		rc.Close()
		return nil, fmt.Errorf("%s: dtype %q: half floats are not supported", where, t)
	}
	return a, nil
}

// openNPY opens a standalone .npy file.
func openNPY(path string) (*npyArray, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return newNPYArray(path, f)
}

func (a *npyArray) close() { a.c.Close() }

// len is the number of elements.
func (a *npyArray) len() int {
	n := 1
	for _, d := range a.shape {
		n *= d
	}
	return n
}

func (a *npyArray) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", a.where, fmt.Sprintf(format, args...))
}

// next decodes element i (for error messages) as int64 or float64.
func (a *npyArray) next(i int) (iv int64, fv float64, err error) {
	var b [8]byte
	if _, err := io.ReadFull(a.r, b[:a.size]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, a.errorf("truncated: %d of %d values present", i, a.len())
		}
		return 0, 0, a.errorf("%v", err)
	}
	le := binary.LittleEndian
	switch {
	case a.kind == 'f' && a.size == 4:
		fv = float64(math.Float32frombits(le.Uint32(b[:])))
		return int64(fv), fv, nil
	case a.kind == 'f':
		fv = math.Float64frombits(le.Uint64(b[:]))
		return int64(fv), fv, nil
	case a.kind == 'i':
		switch a.size {
		case 1:
			iv = int64(int8(b[0]))
		case 2:
			iv = int64(int16(le.Uint16(b[:])))
		case 4:
			iv = int64(int32(le.Uint32(b[:])))
		default:
			iv = int64(le.Uint64(b[:]))
		}
	default: // unsigned or bool
		switch a.size {
		case 1:
			iv = int64(b[0])
		case 2:
			iv = int64(le.Uint16(b[:]))
		case 4:
			iv = int64(le.Uint32(b[:]))
		default:
			iv = int64(le.Uint64(b[:]))
		}
	}
	return iv, float64(iv), nil
}

// eachInt streams an integer array.
func (a *npyArray) eachInt(fn func(i int, v int64) error) error {
	if a.kind == 'f' {
		return a.errorf("dtype is floating point (%s%d), want integers", "f", a.size)
	}
	for i := range a.len() {
		v, _, err := a.next(i)
		if err != nil {
			return err
		}
		if err := fn(i, v); err != nil {
			return err
		}
	}
	return a.end()
}

// end reads what follows the last element: archive/zip checks an npz
// member's CRC-32 only at the member's end.
func (a *npyArray) end() error {
	if _, err := io.Copy(io.Discard, a.r); err != nil {
		if errors.Is(err, zip.ErrChecksum) {
			return a.errorf("checksum mismatch: the archive is corrupt")
		}
		return a.errorf("%v", err)
	}
	return nil
}

// headerCap bounds what a header's shape may preallocate: a shape that
// promises more than the file holds fails at its end, not in the allocator.
const headerCap = 1 << 20

// ints reads a whole integer array.
func (a *npyArray) ints() ([]int64, error) {
	out := make([]int64, 0, min(a.len(), headerCap))
	err := a.eachInt(func(_ int, v int64) error {
		out = append(out, v)
		return nil
	})
	return out, err
}

// floats reads a whole numeric array as finite float32 values.
func (a *npyArray) floats() ([]float32, error) {
	out := make([]float32, 0, min(a.len(), headerCap))
	for i := range a.len() {
		_, v, err := a.next(i)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
			return nil, a.errorf("value %d is %v, not a finite float32", i, v)
		}
		out = append(out, float32(v))
	}
	return out, a.end()
}

// npzFile is an open .npz archive.
type npzFile struct {
	path string
	z    *npz.Reader
}

func openNPZ(path string) (*npzFile, error) {
	z, err := npz.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable npz archive (truncated or not a zip?): %w", path, err)
	}
	return &npzFile{path: path, z: z}, nil
}

func (f *npzFile) close() { f.z.Close() }

func (f *npzFile) has(name string) bool {
	for _, k := range f.z.Keys() {
		if k == name+".npy" {
			return true
		}
	}
	return false
}

// array opens a member array; a missing one is named.
func (f *npzFile) array(name string) (*npyArray, error) {
	if !f.has(name) {
		return nil, fmt.Errorf("%s: array %q missing", f.path, name)
	}
	rc, err := f.z.Open(name + ".npy")
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", f.path, name, err)
	}
	return newNPYArray(f.path+": "+name, rc)
}

// readInts and readFloats read a whole member array.
func (f *npzFile) readInts(name string) ([]int64, error) {
	a, err := f.array(name)
	if err != nil {
		return nil, err
	}
	defer a.close()
	return a.ints()
}

func (f *npzFile) readFloats(name string) ([]float32, error) {
	a, err := f.array(name)
	if err != nil {
		return nil, err
	}
	defer a.close()
	return a.floats()
}

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

	"strconv"

	"sancus/src/atomicfile"
	"sancus/src/budget"
)

// NumPy arrays are read with a header parser of our own (a header is a
// few dozen bytes any file can forge: shape, dtype and length are checked
// before they size anything) and decoded here, in chunks: an edge array
// is never held whole. Errors name the file and the array.

// npyArray is one NumPy array opened for reading.
type npyArray struct {
	where string // "cora.npz: adj_indices" or "labels.npy"
	kind  byte   // 'i', 'u', 'f' or 'b'
	size  int    // bytes per element
	shape []int
	n     int // elements: the shape's product
	r     *bufio.Reader
	c     io.Closer
}

// npyHeader is what a .npy header declares.
type npyHeader struct {
	descr   string
	fortran bool
	shape   []int
	n       int   // the shape's product
	bytes   int64 // the header's own length, magic to padding
}

// npyMagic opens every .npy file; npyMaxHeader bounds its header (NumPy
// writes a few dozen bytes and itself refuses more than 10,000 by default).
const (
	npyMagic     = "\x93NUMPY"
	npyMaxHeader = 1 << 16
	// npyMaxElems bounds a shape's product, so that it and its byte count
	// stay exact in an int64.
	npyMaxElems = 1 << 56
)

// readNPYHeader reads and checks the magic, version and header of a .npy
// stream, leaving r at the first element.
func readNPYHeader(r io.Reader) (npyHeader, error) {
	var h npyHeader
	var pre [12]byte // magic, version, and a header length of 2 bytes (version 1) or 4
	if _, err := io.ReadFull(r, pre[:10]); err != nil {
		return h, fmt.Errorf("too short for a NumPy header (%v)", err)
	}
	if string(pre[:6]) != npyMagic {
		if c := atomicfile.Compression(pre[:6]); c != "" {
			return h, fmt.Errorf("%s-compressed, not a NumPy array: decompress it first", c)
		}
		return h, errors.New("no NumPy magic: not a .npy array")
	}
	var hlen int
	switch pre[6] {
	case 1:
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		if _, err := io.ReadFull(r, pre[10:12]); err != nil {
			return h, errors.New("truncated header")
		}
		hlen = int(binary.LittleEndian.Uint32(pre[8:12]))
	default:
		return h, fmt.Errorf("format version %d.%d, this sancus reads 1 to 3", pre[6], pre[7])
	}
	h.bytes = 10 + int64(hlen)
	if pre[6] != 1 {
		h.bytes += 2
	}
	if hlen > npyMaxHeader {
		return h, fmt.Errorf("header of %d bytes, more than the %d a NumPy array's header takes", hlen, npyMaxHeader)
	}
	buf := make([]byte, hlen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, errors.New("truncated header")
	}
	if err := h.parse(string(buf)); err != nil {
		return h, fmt.Errorf("header %q: %v", clip(strings.TrimSpace(string(buf))), err)
	}
	return h, nil
}

// parse reads a header's Python dict literal: 'descr' (a dtype string),
// 'fortran_order' (True or False) and 'shape' (a tuple of integers).
func (h *npyHeader) parse(s string) error {
	p := &pyLit{s: strings.TrimSpace(s)}
	if !p.eat("{") {
		return errors.New("not a dict")
	}
	seen := map[string]bool{}
	for !p.eat("}") {
		key, err := p.str()
		if err != nil {
			return err
		}
		if seen[key] {
			return fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		if !p.eat(":") {
			return fmt.Errorf("no ':' after %q", key)
		}
		switch key {
		case "descr":
			if h.descr, err = p.str(); err != nil {
				return fmt.Errorf("descr: %v (structured dtypes are not supported)", err)
			}
		case "fortran_order":
			switch {
			case p.eat("True"):
				h.fortran = true
			case p.eat("False"):
			default:
				return errors.New("fortran_order is neither True nor False")
			}
		case "shape":
			if h.shape, err = p.tuple(); err != nil {
				return fmt.Errorf("shape: %v", err)
			}
		default:
			return fmt.Errorf("unknown key %q", key)
		}
		if !p.eat(",") && !strings.HasPrefix(p.s, "}") {
			return errors.New("no ',' between entries")
		}
	}
	if p.s != "" {
		return errors.New("text after the dict")
	}
	if !seen["descr"] || !seen["fortran_order"] || !seen["shape"] {
		return errors.New("want descr, fortran_order and shape")
	}
	h.n = 1
	for _, d := range h.shape {
		if d > 0 && h.n > npyMaxElems/d {
			return fmt.Errorf("shape %v holds more than 2^56 elements", h.shape)
		}
		h.n *= d
	}
	return nil
}

// pyLit consumes a Python literal from its front.
type pyLit struct{ s string }

func (p *pyLit) eat(tok string) bool {
	if strings.HasPrefix(p.s, tok) {
		p.s = strings.TrimLeft(p.s[len(tok):], " \t\n")
		return true
	}
	return false
}

// str reads a quoted string without escapes (a dtype or a key).
func (p *pyLit) str() (string, error) {
	if p.s == "" || (p.s[0] != '\'' && p.s[0] != '"') {
		return "", errors.New("want a quoted string")
	}
	end := strings.IndexByte(p.s[1:], p.s[0])
	if end < 0 {
		return "", errors.New("unterminated string")
	}
	v := p.s[1 : 1+end]
	p.s = strings.TrimLeft(p.s[2+end:], " \t\n")
	return v, nil
}

// tuple reads a tuple of non-negative integers: (), (n,), (a, b).
func (p *pyLit) tuple() ([]int, error) {
	if !p.eat("(") {
		return nil, errors.New("want a tuple")
	}
	var out []int
	for !p.eat(")") {
		i := 0
		for i < len(p.s) && p.s[i] >= '0' && p.s[i] <= '9' {
			i++
		}
		if i == 0 || i > 18 {
			return nil, errors.New("want dimensions of 0 to 18 digits")
		}
		d, _ := strconv.Atoi(p.s[:i])
		out = append(out, d)
		p.s = strings.TrimLeft(strings.TrimPrefix(p.s[i:], "L"), " \t\n")
		if !p.eat(",") && !strings.HasPrefix(p.s, ")") {
			return nil, errors.New("no ',' between dimensions")
		}
		if len(out) > 32 { // NumPy's own limit on dimensions
			return nil, errors.New("more than 32 dimensions")
		}
	}
	return out, nil
}

// newNPYArray reads an array's header from rc, which holds size bytes
// (header included): a shape promising more is refused before any read.
func newNPYArray(where string, rc io.ReadCloser, size int64) (*npyArray, error) {
	br := bufio.NewReaderSize(rc, 1<<20)
	h, err := readNPYHeader(br)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: not a NumPy array we can read: %w", where, err)
	}
	a := &npyArray{where: where, shape: h.shape, n: h.n, c: rc, r: br}
	t := h.descr
	if len(t) < 3 || (t[0] != '<' && t[0] != '|' && t[0] != '=') || !strings.ContainsRune("iufb", rune(t[1])) {
		rc.Close()
		return nil, fmt.Errorf("%s: dtype %q is not a little-endian number", where, clip(t))
	}
	a.kind = t[1]
	switch t[2:] {
	case "1", "2", "4", "8":
		a.size = int(t[2] - '0')
	default:
		rc.Close()
		return nil, fmt.Errorf("%s: dtype %q has an unsupported element size", where, clip(t))
	}
	if h.fortran && len(a.shape) > 1 {
		rc.Close()
		return nil, fmt.Errorf("%s: Fortran-ordered arrays are not supported (save it C-ordered)", where)
	}
	if a.kind == 'f' && a.size < 4 {
		rc.Close()
		return nil, fmt.Errorf("%s: dtype %q: half floats are not supported", where, t)
	}
	if data := size - h.bytes; int64(a.n) > data/int64(a.size) {
		rc.Close()
		return nil, fmt.Errorf("%s: shape %v of %d-byte values needs %d bytes, the file holds %d after its header: truncated, or a corrupt header",
			where, a.shape, a.size, budget.Bytes(int64(a.n), int64(a.size)), max(data, 0))
	}
	return a, nil
}

// openNPY opens a standalone .npy file.
func openNPY(path string) (*npyArray, error) {
	f, size, err := openSized(path)
	if err != nil {
		return nil, err
	}
	return newNPYArray(path, f, size)
}

func (a *npyArray) close() { a.c.Close() }

// len is the number of elements.
func (a *npyArray) len() int { return a.n }

// vector checks, before a value is read, that the array is 1-D with as
// many entries as want says: exactly want, or up to -want if negative.
func (a *npyArray) vector(what string, want int) error {
	if len(a.shape) != 1 {
		return a.errorf("shape %v: want %s (a 1-D array)", a.shape, what)
	}
	if (want >= 0 && a.n != want) || (want < 0 && a.n > -want) {
		cmp := ""
		if want < 0 {
			want, cmp = -want, "at most "
		}
		return fmt.Errorf("%s has %d entries, want %s%d (%s): an array of another graph, or a corrupt header", a.where, a.n, cmp, want, what)
	}
	return nil
}

func (a *npyArray) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", a.where, fmt.Sprintf(format, args...))
}

// next decodes element i (for error messages) as int64 or float64.
func (a *npyArray) next(i int) (iv int64, fv float64, err error) {
	var b [8]byte
	if _, err := io.ReadFull(a.r, b[:a.size]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, 0, a.errorf("truncated: %d of %d values present", i, a.n)
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
	for i := range a.n {
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

// end checks that nothing follows the last element, and reads to the end
// of the stream: archive/zip checks an npz member's CRC-32 only there.
// Reading one byte past the shape is enough to refuse a member that
// inflates far beyond it.
func (a *npyArray) end() error {
	var b [1]byte
	n, err := io.ReadFull(a.r, b[:])
	switch {
	case n > 0:
		return a.errorf("data after the %d values its shape %v declares: a corrupt header", a.n, a.shape)
	case errors.Is(err, zip.ErrChecksum):
		return a.errorf("checksum mismatch: the archive is corrupt")
	case err != io.EOF:
		return a.errorf("%v", err)
	}
	return nil
}

// whole checks that an array of per bytes a value, read whole, fits.
func (a *npyArray) whole(per int64) error {
	return budget.Check(a.where, fmt.Sprintf("an array of %d values", a.n), budget.Bytes(int64(a.n), per))
}

// ints reads a whole integer array.
func (a *npyArray) ints() ([]int64, error) {
	if err := a.whole(8); err != nil {
		return nil, err
	}
	out := make([]int64, 0, a.n)
	err := a.eachInt(func(_ int, v int64) error {
		out = append(out, v)
		return nil
	})
	return out, err
}

// floats reads a whole numeric array as finite float32 values.
func (a *npyArray) floats() ([]float32, error) {
	if err := a.whole(4); err != nil {
		return nil, err
	}
	out := make([]float32, 0, a.n)
	for i := range a.n {
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
	path    string
	f       io.Closer
	members map[string]*zip.File // by array name, without .npy
}

func openNPZ(path string) (*npzFile, error) {
	f, size, err := openSized(path)
	if err != nil {
		return nil, err
	}
	z, err := zip.NewReader(f, size)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a readable npz archive (truncated or not a zip?): %w", path, err)
	}
	out := &npzFile{path: path, f: f, members: map[string]*zip.File{}}
	for _, m := range z.File {
		if name, ok := strings.CutSuffix(m.Name, ".npy"); ok {
			out.members[name] = m
		}
	}
	return out, nil
}

func (f *npzFile) close() { f.f.Close() }

func (f *npzFile) has(name string) bool { return f.members[name] != nil }

// array opens a member array; a missing one is named.
func (f *npzFile) array(name string) (*npyArray, error) {
	m := f.members[name]
	if m == nil {
		return nil, fmt.Errorf("%s: array %q missing", f.path, name)
	}
	rc, err := m.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", f.path, name, err)
	}
	size := int64(min(m.UncompressedSize64, math.MaxInt64))
	return newNPYArray(f.path+": "+name, rc, size)
}

// readInts reads a whole 1-D member array of want entries (up to -want if
// negative), checking its shape before reading a value.
func (f *npzFile) readInts(name string, want int, what string) ([]int64, error) {
	a, err := f.array(name)
	if err != nil {
		return nil, err
	}
	defer a.close()
	if err := a.vector(what, want); err != nil {
		return nil, err
	}
	return a.ints()
}

// readFloats is readInts for values.
func (f *npzFile) readFloats(name string, want int, what string) ([]float32, error) {
	a, err := f.array(name)
	if err != nil {
		return nil, err
	}
	defer a.close()
	if err := a.vector(what, want); err != nil {
		return nil, err
	}
	return a.floats()
}

// openSized opens a regular file (atomicfile.Open) and says its size.
func openSized(path string) (*os.File, int64, error) {
	f, err := atomicfile.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

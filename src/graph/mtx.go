package graph

import (
	"fmt"
	"os"
	"strings"

	"sancus/src/budget"
)

// MTXHeader is the banner and size line of a Matrix Market coordinate file.
type MTXHeader struct {
	Field    string // real, integer or pattern
	Symmetry string // general or symmetric
	Rows     int
	Cols     int
	NNZ      int
}

// ReadMTX streams a coordinate Matrix Market file, calling fn with 0-based
// (row, col, value) for every stored entry (pattern entries have value 1).
// It checks the banner, the size line, index ranges, numbers and the entry
// count.
func ReadMTX(path string, fn func(r, c int, v float64) error) (MTXHeader, error) {
	return ReadMTXSized(path, nil, fn)
}

// fits checks a size line against the file and the machine before anything
// is allocated for it: every entry takes 4 bytes of text or more, and the
// matrix as a CSR (row pointers; a column and a value per entry, twice for
// a symmetric one) must fit in the memory this process can still take.
func (l *lineReader) fits(h MTXHeader) error {
	if l.size >= 0 && int64(h.NNZ) > l.size/4 {
		return l.errorf("the size line declares %d entries, but the file holds %d bytes (an entry takes 4 or more)", h.NNZ, l.size)
	}
	entries := int64(h.NNZ)
	if h.Symmetry == "symmetric" {
		entries *= 2
	}
	rows := budget.Bytes(int64(max(h.Rows, h.Cols))+1, 8)
	return budget.Check(l.at(), fmt.Sprintf("a %d × %d matrix of %d entries", h.Rows, h.Cols, h.NNZ), rows+budget.Bytes(entries, 8))
}

// ReadMTXSized is ReadMTX that calls sized (if set) with the header as soon
// as the size line is read, before any entry: a reader can allocate once.
func ReadMTXSized(path string, sized func(MTXHeader) error, fn func(r, c int, v float64) error) (MTXHeader, error) {
	var h MTXHeader
	l, err := openLines(path)
	if err != nil {
		return h, err
	}
	defer l.close()
	if !l.next() {
		if err := l.err(); err != nil {
			return h, err
		}
		return h, l.eofErrorf("empty file, expected a %%%%MatrixMarket banner")
	}
	banner := strings.Fields(strings.ToLower(l.text))
	if len(banner) != 5 || banner[0] != "%%matrixmarket" || banner[1] != "matrix" {
		return h, l.errorf("bad Matrix Market banner %q", clip(l.text))
	}
	if banner[2] != "coordinate" {
		return h, l.errorf("only coordinate format is supported, got %q", clip(banner[2]))
	}
	h.Field, h.Symmetry = banner[3], banner[4]
	switch h.Field {
	case "real", "integer", "pattern":
	default:
		return h, l.errorf("unsupported field %q (want real, integer or pattern)", clip(h.Field))
	}
	switch h.Symmetry {
	case "general", "symmetric":
	default:
		return h, l.errorf("unsupported symmetry %q (want general or symmetric)", clip(h.Symmetry))
	}
	hasSize := false
	count := 0
	for l.next() {
		t := strings.TrimSpace(l.text)
		if t == "" || t[0] == '%' {
			continue
		}
		f := strings.Fields(t)
		if !hasSize {
			if len(f) != 3 {
				return h, l.errorf("size line needs 3 integers (rows cols entries), got %q", clip(t))
			}
			var err error
			if h.Rows, err = l.atoi(f[0], "row count"); err != nil {
				return h, err
			}
			if h.Cols, err = l.atoi(f[1], "column count"); err != nil {
				return h, err
			}
			if h.NNZ, err = l.atoi(f[2], "entry count"); err != nil {
				return h, err
			}
			if h.Rows < 0 || h.Cols < 0 || h.NNZ < 0 {
				return h, l.errorf("negative size in %q", clip(t))
			}
			if err := l.fits(h); err != nil {
				return h, err
			}
			hasSize = true
			if sized != nil {
				if err := sized(h); err != nil {
					return h, fmt.Errorf("%s:%d: %w", l.path, l.line, err)
				}
			}
			continue
		}
		want := 3
		if h.Field == "pattern" {
			want = 2
		}
		if len(f) != want {
			return h, l.errorf("entry needs %d fields, got %d in %q", want, len(f), clip(t))
		}
		r, err := l.atoi(f[0], "row index")
		if err != nil {
			return h, err
		}
		c, err := l.atoi(f[1], "column index")
		if err != nil {
			return h, err
		}
		if r < 1 || r > h.Rows {
			return h, l.errorf("row index %d outside 1..%d", r, h.Rows)
		}
		if c < 1 || c > h.Cols {
			return h, l.errorf("column index %d outside 1..%d", c, h.Cols)
		}
		v := 1.0
		if want == 3 {
			if v, err = l.atof(f[2], "value"); err != nil {
				return h, err
			}
		}
		count++
		if count > h.NNZ {
			return h, l.errorf("more entries than the %d the size line declares", h.NNZ)
		}
		if err := fn(r-1, c-1, v); err != nil {
			return h, l.errorf("%v", err)
		}
	}
	if err := l.err(); err != nil {
		return h, err
	}
	if !hasSize {
		return h, l.eofErrorf("no size line")
	}
	if count != h.NNZ {
		return h, l.eofErrorf("%d entries, the size line declares %d (truncated file?)", count, h.NNZ)
	}
	return h, nil
}

// EdgeValues reports whether a dataset's graph file (a directory's, or a
// file itself) is a Matrix Market file with values (real or integer), and
// its path and field: sancus trains on the pattern, so a caller can say
// the values are ignored.
func EdgeValues(data string) (path, field string, ok bool) {
	path = data
	if st, err := os.Stat(data); err == nil && st.IsDir() {
		if path, err = graphFile(data); err != nil {
			return "", "", false
		}
	}
	if !strings.HasSuffix(path, ".mtx") {
		return "", "", false
	}
	read := false
	ReadMTXSized(path, func(h MTXHeader) error { // stop after the header
		field, read = h.Field, true
		return fmt.Errorf("header read")
	}, nil)
	if !read || field == "pattern" {
		return "", "", false
	}
	return path, field, true
}

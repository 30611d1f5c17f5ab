package graph

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// lineReader yields lines of a text file (gunzipped when its name ends in
// .gz, as OGB ships its CSVs) and formats errors as file:line.
type lineReader struct {
	path string
	f    *os.File
	sc   *bufio.Scanner
	line int
	text string
}

func openLines(path string) (*lineReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		if r, err = gzip.NewReader(bufio.NewReaderSize(f, 1<<20)); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: not a gzip file: %w", path, err)
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	return &lineReader{path: path, f: f, sc: sc}, nil
}

// next advances to the next line; false at end of file or on a read error
// (see err).
func (l *lineReader) next() bool {
	if !l.sc.Scan() {
		return false
	}
	l.line++
	l.text = l.sc.Text()
	return true
}

// err returns a read error (not EOF), with the file name.
func (l *lineReader) err() error {
	if err := l.sc.Err(); err != nil && err != io.EOF {
		return fmt.Errorf("%s:%d: %w", l.path, l.line+1, err)
	}
	return nil
}

func (l *lineReader) errorf(format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", l.path, l.line, fmt.Sprintf(format, args...))
}

// eofErrorf reports a problem found at end of file (e.g. too few lines).
func (l *lineReader) eofErrorf(format string, args ...any) error {
	return fmt.Errorf("%s:%d: unexpected end of file: %s", l.path, l.line, fmt.Sprintf(format, args...))
}

func (l *lineReader) close() { l.f.Close() }

// fields splits the current line on spaces and tabs.
func (l *lineReader) fields() []string { return strings.Fields(l.text) }

func (l *lineReader) atoi(s, what string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, l.errorf("%s %q is not an integer", what, s)
	}
	return v, nil
}

func (l *lineReader) atof(s, what string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, l.errorf("%s %q is not a number", what, s)
	}
	// Values are stored as float32: NaN, ±Inf and anything past float32's
	// range would silently poison every product they enter.
	if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
		return 0, l.errorf("%s %q is not a finite float32", what, s)
	}
	return v, nil
}

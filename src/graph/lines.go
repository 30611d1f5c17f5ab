package graph

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"sancus/src/atomicfile"
)

// lineReader yields lines of a text file (gunzipped when its name ends in
// .gz, as OGB ships its CSVs) and formats errors as file:line.
type lineReader struct {
	path string
	size int64 // bytes on disk; -1 for a compressed file
	f    io.Closer
	sc   *bufio.Scanner
	line int
	text string
}

func openLines(path string) (*lineReader, error) {
	f, err := atomicfile.OpenText(path)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	l := &lineReader{path: path, size: -1, f: f, sc: sc}
	if st, err := os.Stat(path); err == nil && !strings.HasSuffix(path, ".gz") {
		l.size = st.Size()
	}
	return l, nil
}

// maxLine is the longest line a text file may have: a dense feature row
// of a million values fits.
const maxLine = 1 << 26

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
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s:%d: a line longer than %d MB: not a text file of this format", l.path, l.line+1, maxLine>>20)
		}
		return fmt.Errorf("%s:%d: %w", l.path, l.line+1, err)
	}
	return nil
}

// at is where the current line is, for budget.Check.
func (l *lineReader) at() string { return fmt.Sprintf("%s:%d", l.path, l.line) }

// clip shortens a line quoted in an error: a binary file's "line" can be
// megabytes of noise.
func clip(t string) string {
	if len(t) <= 80 {
		return t
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return t[:cut] + "…"
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
		return 0, l.errorf("%s %q is not an integer", what, clip(s))
	}
	return v, nil
}

func (l *lineReader) atof(s, what string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, l.errorf("%s %q is not a number", what, clip(s))
	}
	// Values are stored as float32: NaN, ±Inf and anything past float32's
	// range would silently poison every product they enter.
	if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
		return 0, l.errorf("%s %q is not a finite float32", what, s)
	}
	return v, nil
}

// Package progress tells a person how far a long step has come and about
// how long it has left: a line rewritten in place when the output is a
// terminal, a plain line every 30 seconds when it is a log (a batch job's).
// A nil *Meter is silent, so a caller that must say nothing (not rank 0,
// --quiet) passes nil and calls it all the same.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Every is how often a log gets a line.
const Every = 30 * time.Second

// A Meter follows one step of a known amount of work.
type Meter struct {
	w     io.Writer
	what  string
	unit  string
	total int64
	tty   bool
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	start time.Time
	last  time.Time
	done  int64
}

// New starts a meter for what, total units of unit ("edges", "parts").
// w nil: silent (a nil *Meter).
func New(w io.Writer, what string, total int64, unit string) *Meter {
	if w == nil {
		return nil
	}
	m := &Meter{w: w, what: what, unit: unit, total: total, tty: isTerminal(w), every: Every, now: time.Now}
	m.start = m.now()
	m.last = m.start
	return m
}

// Add records n more units done.
func (m *Meter) Add(n int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set(m.done + n)
}

// Set records done units done in all.
func (m *Meter) Set(done int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set(done)
}

func (m *Meter) set(done int64) {
	m.done = done
	t := m.now()
	wait := m.every
	if m.tty {
		wait = 200 * time.Millisecond
	}
	if t.Sub(m.last) < wait {
		return
	}
	m.last = t
	m.line(t)
}

// Done ends the step: a terminal's line is completed.
func (m *Meter) Done() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tty && m.last != m.start {
		fmt.Fprintf(m.w, "\r%s: done in %s\033[K\n", m.what, round(m.now().Sub(m.start)))
	}
}

// line writes where the step stands at t.
func (m *Meter) line(t time.Time) {
	el := t.Sub(m.start)
	if m.total <= 0 { // not known yet: how far, no estimate
		s := fmt.Sprintf("%s: %d %s, %s elapsed", m.what, m.done, m.unit, round(el))
		if m.tty {
			fmt.Fprintf(m.w, "\r%s\033[K", s)
		} else {
			fmt.Fprintln(m.w, s)
		}
		return
	}
	s := fmt.Sprintf("%s: %d of %d %s (%.0f%%), %s elapsed", m.what, m.done, m.total, m.unit, 100*float64(m.done)/float64(max(m.total, 1)), round(el))
	if m.done > 0 && m.done < m.total {
		left := time.Duration(float64(el) * float64(m.total-m.done) / float64(m.done))
		s += ", about " + round(left).String() + " left"
	}
	if m.tty {
		fmt.Fprintf(m.w, "\r%s\033[K", s)
		return
	}
	fmt.Fprintln(m.w, s)
}

func round(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// isTerminal reports whether w is a character device (a terminal), where
// a line can be rewritten in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Stages follows a step of several stages, a meter each: Report with a new
// stage ends the one before. A nil *Stages is silent.
type Stages struct {
	w     io.Writer
	what  string
	stage string
	m     *Meter
}

// NewStages starts following what; w nil: silent.
func NewStages(w io.Writer, what string) *Stages {
	if w == nil {
		return nil
	}
	return &Stages{w: w, what: what}
}

// Report says stage has done of total units (total ≤ 0: not known).
func (s *Stages) Report(stage, unit string, done, total int64) {
	if s == nil {
		return
	}
	if stage != s.stage {
		s.m.Done()
		s.stage = stage
		s.m = New(s.w, s.what+", "+stage, total, unit)
	}
	s.m.Set(done)
}

// Done ends the last stage.
func (s *Stages) Done() {
	if s != nil {
		s.m.Done()
	}
}

package progress

import (
	"strings"
	"testing"
	"time"
)

// TestLogLines: to a log, a line every 30 s of the clock, with how much is
// done and an estimate of what is left; a nil meter says nothing.
func TestLogLines(t *testing.T) {
	var b strings.Builder
	m := New(&b, "prepare", 100, "parts")
	clock := m.start
	m.now = func() time.Time { return clock }
	for i := 0; i < 100; i++ {
		clock = clock.Add(time.Second)
		m.Add(1)
	}
	m.Done()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines in 100 s, want 3 (every 30 s):\n%s", len(lines), b.String())
	}
	if want := "prepare: 30 of 100 parts (30%), 30s elapsed, about 1m10s left"; lines[0] != want {
		t.Fatalf("first line %q, want %q", lines[0], want)
	}
	var silent *Meter
	silent.Add(5)
	silent.Done()
	if New(nil, "x", 1, "y") != nil {
		t.Fatal("a meter without a writer is not silent")
	}
}

package collectives

import (
	"sort"
	"sync"
	"time"
)

// OpStats is what one kind of operation cost on one rank.
type OpStats struct {
	Calls     int64   `json:"calls"`
	BytesSent int64   `json:"bytes_sent"`
	BytesRecv int64   `json:"bytes_recv"`
	Seconds   float64 `json:"seconds"`
	Messages  int64   `json:"messages,omitempty"` // point-to-point messages sent (Total only)
}

// Stats accumulates OpStats per operation name. Safe for concurrent use.
type Stats struct {
	mu   sync.Mutex
	ops  map[string]*OpStats
	sent int64 // point-to-point messages, counted by the transport
}

// Sent counts n point-to-point messages sent; a transport calls it, so
// every algorithm's messages count, whatever op names them.
func (s *Stats) Sent(n int) {
	s.mu.Lock()
	s.sent += int64(n)
	s.mu.Unlock()
}

// Add records one operation.
func (s *Stats) Add(op string, sent, recv int64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops == nil {
		s.ops = map[string]*OpStats{}
	}
	o := s.ops[op]
	if o == nil {
		o = &OpStats{}
		s.ops[op] = o
	}
	o.Calls++
	o.BytesSent += sent
	o.BytesRecv += recv
	o.Seconds += d.Seconds()
}

// Snapshot returns a copy of the per-operation figures.
func (s *Stats) Snapshot() map[string]OpStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]OpStats, len(s.ops))
	for k, v := range s.ops {
		out[k] = *v
	}
	return out
}

// Total sums all operations (under the lock, without a snapshot: the
// engine reads it twice an epoch).
func (s *Stats) Total() OpStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := OpStats{Messages: s.sent}
	for _, v := range s.ops {
		t.Calls += v.Calls
		t.BytesSent += v.BytesSent
		t.BytesRecv += v.BytesRecv
		t.Seconds += v.Seconds
	}
	return t
}

// Names lists the operations seen, sorted.
func (s *Stats) Names() []string {
	snap := s.Snapshot()
	names := make([]string, 0, len(snap))
	for k := range snap {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Reset forgets everything recorded.
func (s *Stats) Reset() {
	s.mu.Lock()
	s.ops, s.sent = nil, 0
	s.mu.Unlock()
}

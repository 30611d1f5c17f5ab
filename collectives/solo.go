package collectives

import (
	"encoding/binary"
	"fmt"
)

// Solo is one rank of a P-rank job run alone: the other ranks are free
// peers. A receive completes at once, its buffer filled with Fill (finite
// as float32, bf16 and integer codes alike); a send is dropped; the
// transport's collectives leave this rank's contribution as the sum
// (Allreduce) or broadcast. So the engine runs its own code for one rank,
// counting what it would send and receive, with no peer to wait for.
//
// What peers contribute at set-up decides what this rank computes (which
// of its rows they ask for, which rows are training rows): Script answers
// those collectives in the order they are made, each checking the sizes it
// is asked for. Past the script, an Allgatherv gives every rank this
// rank's contribution (flags agree, metrics sum to P times its own), and
// an Alltoallv is an error.
type Solo struct {
	rank, size int
	Script     []Answer
	stats      Stats
	calls      int
}

// Fill is the 4-byte word a received buffer is filled with: 0.00997 as
// float32, and as bf16 in either half.
const Fill uint32 = 0x3C233C23

// Answer fills what peers contribute to one set-up collective: recv,
// counts[j] bytes from rank j in rank order, this rank's part already in
// place (Allgatherv) or not (Alltoallv). Name says which step it answers.
type Answer struct {
	Name     string
	Alltoall bool
	Fill     func(recv []byte, counts []int) error
}

// NewSolo is rank r of size ranks, run alone.
func NewSolo(r, size int) *Solo { return &Solo{rank: r, size: size} }

func (s *Solo) Rank() int     { return s.rank }
func (s *Solo) Size() int     { return s.size }
func (s *Solo) Stats() *Stats { return &s.stats }
func (s *Solo) Close() error  { return nil }
func (s *Solo) Abort(error)   {}
func (s *Solo) Barrier() error {
	return nil
}
func (s *Solo) Bcast([]byte, int) error   { return nil }
func (s *Solo) Allreduce([]float32) error { return nil }

// ScriptDone reports whether every scripted answer was used.
func (s *Solo) ScriptDone() bool { return s.calls >= len(s.Script) }

func (s *Solo) Isend(buf []byte, dst, tag int) (Request, error) {
	if dst < 0 || dst >= s.size {
		return nil, &Error{Rank: s.rank, Op: "send", Err: fmt.Errorf("peer %d outside 0..%d", dst, s.size-1)}
	}
	return doneReq{}, nil
}

func (s *Solo) Irecv(buf []byte, src, tag int) (Request, error) {
	if src < 0 || src >= s.size {
		return nil, &Error{Rank: s.rank, Op: "recv", Err: fmt.Errorf("peer %d outside 0..%d", src, s.size-1)}
	}
	fill(buf)
	return doneReq{}, nil
}

func fill(b []byte) {
	var w [4]byte
	binary.LittleEndian.PutUint32(w[:], Fill)
	for i := range b {
		b[i] = w[i%4]
	}
}

// next is the scripted answer of this collective, or nil past the script.
func (s *Solo) next(alltoall bool) (*Answer, error) {
	if s.calls >= len(s.Script) {
		return nil, nil
	}
	a := &s.Script[s.calls]
	s.calls++
	if a.Alltoall != alltoall {
		return nil, fmt.Errorf("solo rank %d: set-up collective %d was expected to be %s: the engine's set-up changed; update the replay's script", s.rank, s.calls, a.Name)
	}
	return a, nil
}

func (s *Solo) Allgatherv(send, recv []byte, counts []int) error {
	a, err := s.next(false)
	if err != nil {
		return err
	}
	off := 0
	for j, n := range counts {
		if j == s.rank || a == nil {
			if len(send) != counts[s.rank] {
				return fmt.Errorf("solo rank %d: allgatherv of %d bytes for a count of %d", s.rank, len(send), counts[s.rank])
			}
			if n == len(send) {
				copy(recv[off:off+n], send)
			} else {
				fill(recv[off : off+n])
			}
		}
		off += n
	}
	if a != nil {
		return a.Fill(recv, counts)
	}
	return nil
}

func (s *Solo) Alltoallv(send []byte, sc []int, recv []byte, rc []int) error {
	a, err := s.next(true)
	if err != nil {
		return err
	}
	if a == nil {
		return fmt.Errorf("solo rank %d: an all-to-all past set-up has no peers to answer it", s.rank)
	}
	off := 0
	for j := range s.rank {
		off += sc[j]
	}
	roff := 0
	for j := range s.rank {
		roff += rc[j]
	}
	copy(recv[roff:roff+rc[s.rank]], send[off:off+sc[s.rank]])
	return a.Fill(recv, rc)
}

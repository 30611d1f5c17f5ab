package sample

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Draw is where a rank's mini-batch comes from, parsed once from a flag or
// a configuration.
type Draw uint8

const (
	// DrawLocal: each rank draws its share of the batch from the training
	// vertices it owns (DistDGL's two-level split).
	DrawLocal Draw = iota
	// DrawGlobal: one global batch is drawn from every training vertex and
	// each rank trains an even slice of it, fetching what it needs; the
	// global batch does not depend on the number of ranks.
	DrawGlobal
)

var drawNames = [...]string{DrawLocal: "local", DrawGlobal: "global"}

// ParseDraw reads a draw's name: local (also "") or global.
func ParseDraw(s string) (Draw, error) {
	if s == "" {
		return DrawLocal, nil
	}
	for d, name := range drawNames {
		if s == name {
			return Draw(d), nil
		}
	}
	return DrawLocal, fmt.Errorf("unknown batch draw %q (local or global)", s)
}

func (d Draw) String() string {
	if int(d) < len(drawNames) {
		return drawNames[d]
	}
	return fmt.Sprintf("Draw(%d)", uint8(d))
}

// MarshalText writes the draw's name.
func (d Draw) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a draw's name.
func (d *Draw) UnmarshalText(b []byte) (err error) {
	*d, err = ParseDraw(string(b))
	return err
}

// Set and Type make a Draw a command-line flag.
func (d *Draw) Set(s string) error { return d.UnmarshalText([]byte(s)) }
func (d Draw) Type() string        { return "draw" }

// IndependentOfP: the global batch of every step is the same whatever the
// number of ranks, so runs at any P train alike.
func (d Draw) IndependentOfP() bool { return d == DrawGlobal }

// TrainSet is every rank's training vertices, as global ids, known on
// every rank (one allgather at set-up: Gather).
type TrainSet struct {
	ByRank [][]int64 // ByRank[r]: rank r's training vertices, ascending
	// Orig maps a global id to the id that keys the draws (the original
	// node id); nil: the global id itself.
	Orig func(int64) int64
}

// Epoch is one epoch's batches as one rank trains them.
type Epoch struct {
	Mine  [][]int64 // this rank's seeds of each step (global ids, distinct)
	Total []int     // each step's global batch size: the loss's normalizer
}

// Steps is the number of steps every rank takes per epoch with draw d and
// a global batch of size: the same on every rank.
func (t TrainSet) Steps(d Draw, size int) int {
	if d == DrawGlobal {
		n := 0
		for _, v := range t.ByRank {
			n += len(v)
		}
		return max(1, (n+size-1)/size)
	}
	steps := 1
	for r, v := range t.ByRank {
		if b := share(size, len(t.ByRank), r); len(v) > 0 {
			steps = max(steps, (len(v)+b-1)/b)
		}
	}
	return steps
}

// share is rank r's part of a batch of size split over p ranks (at least
// one vertex).
func share(size, p, r int) int {
	s := size / p
	if r < size%p {
		s++
	}
	return max(1, s)
}

// Draw lists rank's seeds of every step of epoch ep. The order is drawn
// from (seed, epoch): DrawLocal permutes each rank's own vertices (a
// rank that runs out first starts its permutation again, so every rank
// takes Steps steps); DrawGlobal permutes all of them, ordered by their
// original ids first, so the batches do not depend on how the graph was
// cut.
func (t TrainSet) Draw(d Draw, size int, seed uint64, ep, rank int) Epoch {
	steps := t.Steps(d, size)
	out := Epoch{Mine: make([][]int64, steps), Total: make([]int, steps)}
	p := len(t.ByRank)
	if d == DrawGlobal {
		var all []int64
		for _, v := range t.ByRank {
			all = append(all, v...)
		}
		key := func(v int64) int64 { return v }
		if t.Orig != nil {
			key = t.Orig
		}
		slices.SortFunc(all, func(a, b int64) int { return cmp.Compare(key(a), key(b)) })
		perm := rand.New(rand.NewPCG(seed, 0x5a3d1e+uint64(ep))).Perm(len(all))
		for s := range steps {
			lo, hi := s*size, min((s+1)*size, len(all))
			n := hi - lo
			out.Total[s] = n
			for _, k := range perm[lo+n*rank/p : lo+n*(rank+1)/p] {
				out.Mine[s] = append(out.Mine[s], all[k])
			}
		}
		return out
	}
	for r, v := range t.ByRank {
		if len(v) == 0 {
			continue
		}
		b := min(share(size, p, r), len(v))
		for s := range steps {
			out.Total[s] += b
		}
		if r != rank {
			continue
		}
		perm := rand.New(rand.NewPCG(seed, 0x10ca1<<32+uint64(ep)<<16+uint64(r))).Perm(len(v))
		for s := range steps {
			for k := range b {
				out.Mine[s] = append(out.Mine[s], v[perm[(s*b+k)%len(v)]])
			}
		}
	}
	return out
}

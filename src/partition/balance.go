package partition

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"sancus/src/graph"
)

// BalanceBy is what a partition's parts are made equal in.
type BalanceBy uint8

const (
	// BalanceAuto is BalanceNNZ where a partition equal in rows is more
	// than 10% unequal in nonzeros (skewed degrees), else BalanceRows.
	BalanceAuto BalanceBy = iota
	BalanceRows           // nodes (β bounds the largest part)
	BalanceNNZ            // nonzeros of Â: a row's degree + 1
)

// ParseBalanceBy reads auto, rows or nnz.
func ParseBalanceBy(s string) (BalanceBy, error) {
	switch s {
	case "auto", "":
		return BalanceAuto, nil
	case "rows":
		return BalanceRows, nil
	case "nnz":
		return BalanceNNZ, nil
	}
	return 0, fmt.Errorf("balance by %q: auto, rows or nnz", s)
}

func (b BalanceBy) String() string { return [...]string{"auto", "rows", "nnz"}[b] }

// autoNNZ is where BalanceAuto turns to nonzeros: max/mean above it.
const autoNNZ = 1.10

// BalanceNonzeros moves nodes out of parts whose nonzeros of Â (degree + 1
// per row) exceed the mean by more than tol, while keeping every part
// within rows·|V|/P nodes: two constraints, as METIS's ncon = 2, because a
// rank's sparse work goes by its nonzeros and its dense work by its rows,
// and both stay balanced only if both are, whatever their ratio on a
// backend. From an over part it moves the nodes least attached to their
// part first, heavy enough to shed its excess within the rows the other
// parts have room for, each to the part with fewest nonzeros that neither
// bound stops; where rows leave no room, it swaps a heavy node for a
// light one of the receiving part. One pass over the edges counts degrees
// and each node's neighbours in its own part. With BalanceAuto it moves
// nothing unless the nonzeros' max/mean exceeds 1.10. It reports that
// max/mean before and after; BalanceRows reads nothing and reports 0, 0.
func BalanceNonzeros(s *graph.EdgeStream, parts []int32, p int, by BalanceBy, tol, rows float64) (before, after float64, err error) {
	if by == BalanceRows {
		return 0, 0, nil
	}
	n := len(parts)
	deg, inside := make([]int32, n), make([]int32, n)
	if err := s.Each(func(u, v int32) error {
		if int(u) >= n || int(v) >= n || u < 0 || v < 0 {
			return fmt.Errorf("edge (%d,%d) outside %d nodes", u, v, n)
		}
		if u != v {
			deg[u]++
			deg[v]++
			if parts[u] == parts[v] {
				inside[u]++
				inside[v]++
			}
		}
		return nil
	}); err != nil {
		return 0, 0, fmt.Errorf("balance by nonzeros: %w", err)
	}
	b := balancer{parts: parts, deg: deg, inside: inside, load: make([]int64, p), size: make([]int, p)}
	var total int64
	for v, q := range parts {
		b.load[q] += b.w(int32(v))
		b.size[q]++
		total += b.w(int32(v))
	}
	mean := float64(total) / float64(p)
	ratio := func() float64 { return float64(slices.Max(b.load)) / mean }
	before = ratio()
	if by == BalanceAuto && before <= autoNNZ {
		return before, before, nil
	}
	b.limit = int64(mean * (1 + tol))
	b.cap = max((n+p-1)/p, int(rows*float64(n)/float64(p)))
	members := make([][]int32, p)
	for v, q := range parts {
		members[q] = append(members[q], int32(v))
	}
	for q := range p {
		if b.load[q] <= b.limit {
			continue
		}
		// Least attached first (the cut grows least), heavier first on ties.
		cand := slices.Clone(members[q])
		slices.SortStableFunc(cand, func(x, y int32) int {
			if c := cmp.Compare(b.attached(x), b.attached(y)); c != 0 {
				return c
			}
			return int(deg[y]) - int(deg[x])
		})
		// The weight a moved node must average for the excess to fit in the
		// rows the other parts can still take.
		room := 0
		for r := range p {
			if r != q {
				room += max(0, b.cap-b.size[r])
			}
		}
		heavy := int64(math.MaxInt64)
		if room > 0 {
			heavy = (b.load[q] - b.limit + int64(room) - 1) / int64(room)
		}
		for _, v := range cand {
			if b.load[q] > b.limit && b.w(v) >= heavy {
				b.move(v, q)
			}
		}
		for _, v := range cand {
			if b.load[q] > b.limit && parts[v] == int32(q) {
				b.move(v, q)
			}
		}
		if b.load[q] > b.limit {
			b.swap(q, cand, members)
		}
	}
	return before, ratio(), nil
}

// balancer is BalanceNonzeros's state: each part's nonzeros and rows, and
// the bounds on them.
type balancer struct {
	parts       []int32
	deg, inside []int32
	load        []int64 // nonzeros per part
	size        []int   // rows per part
	limit       int64
	cap         int
}

func (b *balancer) w(v int32) int64 { return int64(b.deg[v]) + 1 }

func (b *balancer) attached(v int32) float64 {
	return float64(b.inside[v]) / float64(b.deg[v]+1)
}

// move puts v, of part q, into the part with fewest nonzeros that takes it
// within both bounds, if any.
func (b *balancer) move(v int32, q int) {
	to := -1
	for r := range b.load {
		if r != q && b.load[r]+b.w(v) <= b.limit && b.size[r] < b.cap && (to < 0 || b.load[r] < b.load[to]) {
			to = r
		}
	}
	if to >= 0 {
		b.relabel(v, q, to)
	}
}

func (b *balancer) relabel(v int32, from, to int) {
	b.parts[v] = int32(to)
	b.load[from] -= b.w(v)
	b.load[to] += b.w(v)
	b.size[from]--
	b.size[to]++
}

// swap trades q's nodes, heaviest first, for the lightest nodes of parts
// whose rows are full: rows stay put and nonzeros flow out of q.
func (b *balancer) swap(q int, cand []int32, members [][]int32) {
	heavyFirst := slices.Clone(cand)
	slices.SortStableFunc(heavyFirst, func(x, y int32) int { return int(b.deg[y]) - int(b.deg[x]) })
	light := make([][]int32, len(b.load))
	next := make([]int, len(b.load))
	for r := range b.load {
		if r != q {
			light[r] = slices.Clone(members[r])
			slices.SortStableFunc(light[r], func(x, y int32) int {
				if c := int(b.deg[x]) - int(b.deg[y]); c != 0 {
					return c
				}
				return cmp.Compare(b.attached(x), b.attached(y))
			})
		}
	}
	for _, v := range heavyFirst {
		if b.load[q] <= b.limit {
			return
		}
		if b.parts[v] != int32(q) {
			continue
		}
		to := -1
		var u int32
		for r := range b.load {
			if r == q {
				continue
			}
			for next[r] < len(light[r]) && b.parts[light[r][next[r]]] != int32(r) {
				next[r]++
			}
			if next[r] == len(light[r]) {
				continue
			}
			c := light[r][next[r]]
			if b.w(c) < b.w(v) && b.load[r]+b.w(v)-b.w(c) <= b.limit && (to < 0 || b.load[r] < b.load[to]) {
				to, u = r, c
			}
		}
		if to < 0 {
			continue
		}
		b.relabel(v, q, to)
		b.relabel(u, to, q)
		next[to]++
	}
}

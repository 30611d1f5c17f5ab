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
	BalanceAuto  BalanceBy = iota
	BalanceRows            // nodes (β bounds the largest part)
	BalanceNNZ             // nonzeros of Â: a row's degree + 1
	BalanceTrain           // training nodes, the rows kept (BalanceTraining)
)

var balanceNames = [...]string{BalanceAuto: "auto", BalanceRows: "rows", BalanceNNZ: "nnz", BalanceTrain: "train"}

// ParseBalanceBy reads auto, rows, nnz or train.
func ParseBalanceBy(s string) (BalanceBy, error) {
	for b, name := range balanceNames {
		if s == name {
			return BalanceBy(b), nil
		}
	}
	if s == "" {
		return BalanceAuto, nil
	}
	return 0, fmt.Errorf("balance by %q: auto, rows, nnz or train", s)
}

func (b BalanceBy) String() string { return balanceNames[b] }

// Set and Type make a BalanceBy a command-line flag.
func (b *BalanceBy) Set(s string) (err error) { *b, err = ParseBalanceBy(s); return err }
func (b BalanceBy) Type() string              { return "balance" }

// BalanceTraining swaps training nodes of parts holding more than their
// share of train for other nodes of parts holding fewer, one for one, so
// that every part holds ⌊T/P⌋ or ⌈T/P⌉ of the T training nodes and the
// same rows as before. A sampled step's work follows the training nodes a
// rank draws from (a full-graph step's follows its rows, which stay). The
// last training nodes of a part leave first, the first other nodes of a
// part come first: on a dataset whose training nodes come first, as
// Cora's do, the swapped nodes are each part's ends. It reports the
// largest part's training nodes over the mean before and after.
func BalanceTraining(parts []int32, p int, train []int32) (before, after float64) {
	if len(train) == 0 {
		return 0, 0
	}
	isTrain := make([]bool, len(parts))
	count := make([]int, p)
	for _, v := range train {
		isTrain[v] = true
		count[parts[v]]++
	}
	mean := float64(len(train)) / float64(p)
	ratio := func() float64 { return float64(slices.Max(count)) / mean }
	before = ratio()
	// The ⌈T/P⌉ shares go to the parts holding most already.
	quota := make([]int, p)
	order := make([]int, p)
	for q := range order {
		order[q] = q
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(count[b], count[a]) })
	for i, q := range order {
		quota[q] = len(train) / p
		if i < len(train)%p {
			quota[q]++
		}
	}
	var out, in []int32 // training nodes to leave their parts; other nodes to take their places
	for v := len(parts) - 1; v >= 0; v-- {
		if q := parts[v]; isTrain[v] && count[q] > quota[q] {
			out = append(out, int32(v))
			count[q]--
		}
	}
	for v := range parts {
		if q := parts[v]; !isTrain[v] && count[q] < quota[q] {
			in = append(in, int32(v))
			count[q]++
		}
	}
	for i := range min(len(out), len(in)) {
		parts[out[i]], parts[in[i]] = parts[in[i]], parts[out[i]]
	}
	// Training nodes that found no place stay where they were.
	for _, v := range out[min(len(out), len(in)):] {
		count[parts[v]]++
	}
	for _, v := range in[min(len(out), len(in)):] {
		count[parts[v]]--
	}
	return before, ratio()
}

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

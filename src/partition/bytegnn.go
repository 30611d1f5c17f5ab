package partition

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"sancus/src/graph"
)

// BlocksBySplit is ByteGNN's partitioner (the thesis's §4.2.3, Algorithm
// 2), for sampled mini-batch training, which reads only the K-hop
// neighbourhoods of the training, validation and test vertices:
//
//  1. Blocks. Every split vertex is a block centre. A K-hop breadth-first
//     search from all centres at once hands each vertex the block of the
//     first centre that reaches it (the nearest; ties go to the centre
//     earlier in a seeded shuffle); a centre keeps its own block. A
//     vertex no centre reaches within K hops is a block of its own.
//  2. Assignment. Blocks are taken in descending order of their largest
//     split count, and each goes to the part j maximizing
//     CE[j]·BS[j]: CE[j] = (edges between the block and part j) / |P_j|,
//     the cut the move removes, per vertex of the part; BS[j] = 1 −
//     Σ_s w_s·|P_j(s)|/cap_s, how far the part is from full in the
//     splits s = train, val, test.
//
// What the paper leaves open, chosen here:
//   - The weights w_s (its α, β, γ) are the splits' shares of the split
//     vertices: the paper favours the larger split, and this makes BS the
//     fill of the labelled vertices, each split weighted by its work.
//   - Hard bounds beside the score: a part takes a block only if no split
//     count then exceeds cap_s = max(⌈C_s⌉, ⌊1.02·C_s⌋), C_s = |V_s|/P
//     (each split within 2% of the mean, inside 5% after rounding, with
//     room left for the locality term to choose), its vertices in no
//     split stay within β times their mean, and all its vertices within
//     β·|V|/P (what Check asks of every partitioner). Each kind of vertex
//     then has room across the parts whatever the others do, so a block
//     that fits no part whole goes one vertex at a time, each within the
//     bounds where any part allows (else within β·|V|/P alone, else to
//     the part with fewest vertices).
//   - |P_j| + 1 for |P_j| (an empty part scores 0, not ∞). A block with no
//     edge to any placed vertex (every score 0) goes to the part with the
//     highest BS, then the fewest vertices.
//   - Order among equal keys: each centre keeps its own block, so every
//     block holds exactly one split vertex and the paper's key ties all
//     of them; ties go in breadth-first order over the graph (each block
//     when its first vertex is reached), so a block's neighbours are
//     mostly placed before it and CE has something to see. Blocks without
//     a split vertex come last. Where every vertex is in a split (the
//     generated graphs, ogbn-products) blocks are single vertices and
//     this is a greedy streaming pass in that order.
//
// Options.Refine adds passes of label propagation that keep those bounds
// (refine). Memory is the symmetric adjacency (8 bytes per edge) and
// O(|V|) more; time O((K + Refine)·(|V| + |E|)). The result is
// deterministic for a seed.
func BlocksBySplit(s *graph.EdgeStream, p int, opt Options) ([]int32, error) {
	n := s.N
	sp := opt.Splits
	role := make([]int8, n) // split of each vertex: 0 train, 1 val, 2 test, 3 none
	for v := range role {
		role[v] = none
	}
	var total [4]int
	for i, set := range [3][]int32{sp.Train, sp.Val, sp.Test} {
		for _, v := range set {
			if v < 0 || int(v) >= n {
				return nil, fmt.Errorf("bytegnn: split node %d outside the graph's %d nodes", v, n)
			}
			if role[v] == none {
				role[v] = int8(i)
				total[i]++
			}
		}
	}
	total[none] = n - total[0] - total[1] - total[2]
	if total[none] == n {
		return nil, fmt.Errorf("bytegnn: no training, validation or test nodes: it balances their counts (a dataset with labels and a split)")
	}
	ptr, col, err := symmetric(s)
	if err != nil {
		return nil, fmt.Errorf("bytegnn: %w", err)
	}
	hops := opt.Hops
	if hops <= 0 {
		hops = 2
	}

	// Step 1: blocks by a K-hop BFS from every centre at once.
	centres := make([]int32, 0, total[0]+total[1]+total[2])
	for v, r := range role {
		if r != none {
			centres = append(centres, int32(v))
		}
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0xb17e))
	rng.Shuffle(len(centres), func(i, j int) { centres[i], centres[j] = centres[j], centres[i] })
	block := make([]int32, n)
	for v := range block {
		block[v] = -1
	}
	for b, c := range centres {
		block[c] = int32(b)
	}
	frontier := slices.Clone(centres)
	for h := 0; h < hops && len(frontier) > 0; h++ {
		var next []int32
		for _, v := range frontier {
			for _, u := range col[ptr[v]:ptr[v+1]] {
				if block[u] < 0 {
					block[u] = block[v]
					next = append(next, u)
				}
			}
		}
		frontier = next
	}
	nb := int32(len(centres))
	for v := range block {
		if block[v] < 0 {
			block[v] = nb
			nb++
		}
	}

	// Block members, listed block by block (start[b] is where b begins).
	start := make([]int32, nb+1)
	for _, b := range block {
		start[b+1]++
	}
	for b := range nb {
		start[b+1] += start[b]
	}
	members := make([]int32, n)
	fill := slices.Clone(start[:nb])
	for v, b := range block {
		members[fill[b]] = int32(v)
		fill[b]++
	}

	// The order: breadth-first over the graph from the first centre, each
	// block when first reached; then by the largest split count, stably.
	order := make([]int32, 0, nb)
	listed := make([]bool, nb)
	seen := make([]bool, n)
	var queue []int32
	visit := func(root int32) {
		if seen[root] {
			return
		}
		seen[root] = true
		queue = append(queue[:0], root)
		for i := 0; i < len(queue); i++ {
			v := queue[i]
			if b := block[v]; !listed[b] {
				listed[b] = true
				order = append(order, b)
			}
			for _, u := range col[ptr[v]:ptr[v+1]] {
				if !seen[u] {
					seen[u] = true
					queue = append(queue, u)
				}
			}
		}
	}
	for _, c := range centres {
		visit(c)
	}
	for v := range n {
		visit(int32(v))
	}
	key := func(b int32) int { // the block's largest split count
		var c [4]int
		for _, v := range members[start[b]:start[b+1]] {
			c[role[v]]++
		}
		return max(c[0], c[1], c[2])
	}
	keys := make([]int, nb)
	for b := range nb {
		keys[b] = key(b)
	}
	slices.SortStableFunc(order, func(x, y int32) int { return keys[y] - keys[x] })

	// Step 2: Algorithm 2's assignment.
	a := newAssigner(n, p, total, opt.Balance)
	parts := a.parts
	for _, b := range order {
		mem := members[start[b]:start[b+1]]
		if !a.place(mem, ptr, col, role, true) {
			for _, v := range mem {
				a.place([]int32{v}, ptr, col, role, false)
			}
		}
	}
	for range opt.Refine {
		if a.refine(ptr, col, role) == 0 {
			break
		}
	}
	return parts, nil
}

// refine is one pass of label propagation within Algorithm 2's bounds
// (beyond the paper, with Options.Refine): each vertex in turn moves to
// the part holding most of its neighbours when that holds more than its
// own and has room for it in its split (or in the vertices of none) and
// in vertices. It returns how many moved.
func (a *assigner) refine(ptr []int64, col []int32, role []int8) int {
	moved := 0
	var touched []int32
	for v := range a.parts {
		touched = touched[:0]
		for _, u := range col[ptr[v]:ptr[v+1]] {
			q := a.parts[u]
			if a.ce[q] == 0 {
				touched = append(touched, q)
			}
			a.ce[q]++
		}
		cur, r := a.parts[v], role[v]
		best := cur
		for _, q := range touched {
			if a.ce[q] > a.ce[best] && a.count[q][r] < a.cap[r] && a.size[q] < a.rowCap {
				best = q
			}
		}
		for _, q := range touched {
			a.ce[q] = 0
		}
		if best != cur {
			a.parts[v] = best
			a.size[cur]--
			a.size[best]++
			a.count[cur][r]--
			a.count[best][r]++
			moved++
		}
	}
	return moved
}

// splitBound is how far past the mean a part's count of each split may go.
const splitBound = 1.02

// none is the role of a vertex in no split.
const none = 3

// assigner is Algorithm 2's state: each part's vertices and split counts.
type assigner struct {
	parts  []int32
	size   []int
	count  [][4]int // per part: train, val, test, and vertices in no split
	cap    [4]int
	w      [3]float64
	rowCap int
	ce     []int64 // edges from the block being placed to each part
}

// newAssigner bounds each split's count by splitBound and the vertices in
// no split by β: each kind then has room for all of its vertices across
// the parts whatever the others do, so a block that fits nowhere whole
// can always be placed vertex by vertex within the bounds, and the rows
// stay within about β·|V|/P.
func newAssigner(n, p int, total [4]int, beta float64) *assigner {
	a := &assigner{parts: make([]int32, n), size: make([]int, p), count: make([][4]int, p), ce: make([]int64, p)}
	for v := range a.parts {
		a.parts[v] = -1
	}
	all := float64(total[0] + total[1] + total[2])
	for s, t := range total {
		c := float64(t) / float64(p)
		bound := min(beta, splitBound)
		if s == none {
			bound = beta
		}
		a.cap[s] = max(int(math.Ceil(c)), int(bound*c))
		if s != none {
			a.w[s] = float64(t) / all
		}
	}
	a.rowCap = max((n+p-1)/p, int(beta*float64(n)/float64(p)))
	return a
}

// place puts the block mem into the part of the best score among those
// within both bounds, else within the vertex bound alone, and reports
// whether any part had room; a single vertex (not strict) that fits
// nowhere goes to the part with the fewest vertices.
func (a *assigner) place(mem []int32, ptr []int64, col []int32, role []int8, strict bool) bool {
	var bc [4]int
	for _, v := range mem {
		bc[role[v]]++
		for _, u := range col[ptr[v]:ptr[v+1]] {
			if q := a.parts[u]; q >= 0 {
				a.ce[q]++
			}
		}
	}
	defer clear(a.ce)
	fits := func(j int, splits bool) bool {
		if a.size[j]+len(mem) > a.rowCap {
			return false
		}
		for s := range bc {
			if splits && bc[s] > 0 && a.count[j][s]+bc[s] > a.cap[s] {
				return false
			}
		}
		return true
	}
	best, bestScore, bestBS := -1, 0.0, 0.0
	for _, splits := range []bool{true, strict} {
		for j := range a.size {
			if !fits(j, splits) {
				continue
			}
			bs := 1.0
			for s := range a.w {
				bs -= a.w[s] * float64(a.count[j][s]) / float64(max(1, a.cap[s]))
			}
			score := float64(a.ce[j]) / float64(a.size[j]+1) * max(bs, 1e-9)
			if best < 0 || score > bestScore || (score == bestScore && (bs > bestBS || (bs == bestBS && a.size[j] < a.size[best]))) {
				best, bestScore, bestBS = j, score, bs
			}
		}
		if best >= 0 {
			break
		}
	}
	if best < 0 {
		if strict {
			return false
		}
		best = 0 // a single vertex: some part has room (rowCap·P ≥ |V|)
		for j := range a.size {
			if a.size[j] < a.size[best] {
				best = j
			}
		}
	}
	for _, v := range mem {
		a.parts[v] = int32(best)
	}
	a.size[best] += len(mem)
	for s := range bc {
		a.count[best][s] += bc[s]
	}
	return true
}

// symmetric reads the stream into both directions' adjacency (CSR), self
// loops dropped, repeats kept (they weigh an edge twice, as the stream
// does).
func symmetric(s *graph.EdgeStream) ([]int64, []int32, error) {
	n := s.N
	ptr := make([]int64, n+1)
	if err := s.Each(func(u, v int32) error {
		if u < 0 || v < 0 || int(u) >= n || int(v) >= n {
			return fmt.Errorf("edge (%d,%d) outside %d nodes", u, v, n)
		}
		if u != v {
			ptr[u+1]++
			ptr[v+1]++
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	for v := range n {
		ptr[v+1] += ptr[v]
	}
	col := make([]int32, ptr[n])
	next := slices.Clone(ptr[:n])
	if err := s.Each(func(u, v int32) error {
		if u != v {
			col[next[u]] = v
			next[u]++
			col[next[v]] = u
			next[v]++
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	return ptr, col, nil
}

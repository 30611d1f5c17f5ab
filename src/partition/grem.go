package partition

import (
	"fmt"

	"sancus/src/graph"
)

// Grem is Armada's GREM: greedy streaming bisection whose earlier
// assignments keep being refined, applied recursively for P parts. Gaps
// filled (shared/design/sancus-notes.md):
//   - the size update "= 1" of the paper's fix_sizes is −1;
//   - the first chunk is seeded by BFS growing on the chunk's edges (the
//     paper uses METIS there), not by an external library;
//   - P parts come from recursive bisection; when P is odd the two sides
//     get sizes in proportion ⌊P/2⌋ : ⌈P/2⌉;
//   - nodes that appear in no edge of a sub-problem go to the smaller side.
//
// State: a part and two neighbour estimates per node (O(|V|)) plus one
// chunk of edges (ChunkEdges) with its local adjacency.
func Grem(s *graph.EdgeStream, p int, opt Options) ([]int32, error) {
	n := s.N
	parts := make([]int32, n) // all nodes start in part 0 of the recursion
	chunk := opt.ChunkEdges
	if chunk <= 0 {
		chunk = 1 << 20
	}
	// Each sub-problem: the nodes currently labelled `label`, to be split
	// into `count` final parts numbered from `first`.
	type job struct{ label, first, count int32 }
	jobs := []job{{0, 0, int32(p)}}
	label := make([]int32, n) // sub-problem of each node
	for len(jobs) > 0 {
		j := jobs[0]
		jobs = jobs[1:]
		if j.count == 1 {
			for v := range label {
				if label[v] == j.label {
					parts[v] = j.first
				}
			}
			continue
		}
		left := j.count / 2
		frac := float64(left) / float64(j.count)
		// Capacities are absolute: a side that will become k parts may hold
		// k ideal parts plus one part's slack, so the slack does not compound
		// down the recursion and every final part stays within β·|V|/P.
		ideal := float64(n) / float64(p)
		slack := max(1, (opt.Balance-1)*ideal)
		caps := [2]int{int(float64(left)*ideal + slack), int(float64(j.count-left)*ideal + slack)}
		side, err := bisect(s, label, j.label, frac, caps, chunk, max(1, opt.Passes))
		if err != nil {
			return nil, fmt.Errorf("grem: %w", err)
		}
		// New labels: unique per sub-problem (first part index + 1 keeps them apart).
		l0, l1 := j.first*2+1, (j.first+left)*2+2
		for v := range label {
			if label[v] == j.label {
				if side[v] == 0 {
					label[v] = l0
				} else {
					label[v] = l1
				}
			}
		}
		jobs = append(jobs, job{l0, j.first, left}, job{l1, j.first + left, j.count - left})
	}
	return parts, nil
}

// bisect splits the nodes with label[v] == want into sides 0 and 1, side 0
// holding about frac of them.
func bisect(s *graph.EdgeStream, label []int32, want int32, frac float64, capOf [2]int, chunk, passes int) ([]int8, error) {
	n := len(label)
	side := make([]int8, n)
	for v := range side {
		side[v] = -1
	}
	var sizes [2]int
	est := make([][2]float32, n) // running neighbour estimates per side
	first := true
	var src, dst []int32
	flush := func() {
		if len(src) == 0 {
			return
		}
		c := newChunk(src, dst)
		if first {
			c.seed(side, &sizes, frac)
			first = false
		}
		for _, v := range c.nodes {
			old := side[v]
			nb := c.count(v, side)
			if old >= 0 {
				// A weighted average of this chunk and every earlier one,
				// each earlier chunk counting half as much as the next.
				nb[0] = (est[v][0] + nb[0]) / 2
				nb[1] = (est[v][1] + nb[1]) / 2
			}
			t := assign(nb, sizes, capOf, old)
			if old != t {
				sizes[t]++
				if old >= 0 {
					sizes[old]--
				}
				side[v] = t
			}
			est[v] = nb
		}
		src, dst = src[:0], dst[:0]
	}
	// Later passes keep refining with the estimates carried over: every
	// chunk then sees the assignments of the whole graph.
	for pass := 0; pass < passes; pass++ {
		err := s.Each(func(u, v int32) error {
			if int(u) >= n || int(v) >= n {
				return fmt.Errorf("edge (%d,%d) outside %d nodes", u, v, n)
			}
			if u == v || label[u] != want || label[v] != want {
				return nil
			}
			src, dst = append(src, u), append(dst, v)
			if len(src) >= chunk {
				flush()
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		flush()
	}
	for v := range side {
		if label[v] == want && side[v] < 0 { // never in an edge: the side with more room
			t := int8(0)
			if float64(sizes[1])/float64(capOf[1]) < float64(sizes[0])/float64(capOf[0]) {
				t = 1
			}
			side[v] = t
			sizes[t]++
		}
	}
	return side, nil
}

// assign is GREM's greedy choice: the side with more neighbours unless it is
// full; otherwise an assigned node stays put (moving it into a side that is
// full would break the bound) and a new one goes to the emptier side.
func assign(nb [2]float32, sizes, capOf [2]int, old int8) int8 {
	if nb[0] < nb[1] && (sizes[1] < capOf[1] || old == 1) {
		return 1
	}
	if nb[1] < nb[0] && (sizes[0] < capOf[0] || old == 0) {
		return 0
	}
	if old >= 0 {
		return old
	}
	if float64(sizes[0])/float64(capOf[0]) <= float64(sizes[1])/float64(capOf[1]) {
		return 0
	}
	return 1
}

// chunk is one in-memory slice of the edge stream with its local adjacency.
type edgeChunk struct {
	nodes []int32
	index map[int32]int32 // node -> position in nodes
	ptr   []int32
	adj   []int32
}

func newChunk(src, dst []int32) *edgeChunk {
	c := &edgeChunk{index: make(map[int32]int32, len(src))}
	id := func(v int32) int32 {
		i, ok := c.index[v]
		if !ok {
			i = int32(len(c.nodes))
			c.index[v] = i
			c.nodes = append(c.nodes, v)
		}
		return i
	}
	deg := []int32{}
	for k := range src {
		a, b := id(src[k]), id(dst[k])
		for int(max(a, b)) >= len(deg) {
			deg = append(deg, 0)
		}
		deg[a]++
		deg[b]++
	}
	c.ptr = make([]int32, len(c.nodes)+1)
	for i := range c.nodes {
		c.ptr[i+1] = c.ptr[i] + deg[i]
	}
	c.adj = make([]int32, c.ptr[len(c.nodes)])
	fill := append([]int32(nil), c.ptr[:len(c.nodes)]...)
	for k := range src {
		a, b := c.index[src[k]], c.index[dst[k]]
		c.adj[fill[a]] = dst[k]
		fill[a]++
		c.adj[fill[b]] = src[k]
		fill[b]++
	}
	return c
}

// count is cnt_nbrs for one node: its neighbours in this chunk per side.
func (c *edgeChunk) count(v int32, side []int8) [2]float32 {
	var nb [2]float32
	i := c.index[v]
	for _, u := range c.adj[c.ptr[i]:c.ptr[i+1]] {
		if s := side[u]; s >= 0 {
			nb[s]++
		}
	}
	return nb
}

// seed grows side 0 by BFS from the chunk's first node until it holds frac
// of the chunk's nodes; the rest is side 1.
func (c *edgeChunk) seed(side []int8, sizes *[2]int, frac float64) {
	want := int(frac * float64(len(c.nodes)))
	seen := make([]bool, len(c.nodes))
	queue := []int32{}
	taken := 0
	for start := 0; start < len(c.nodes) && taken < want; start++ {
		if seen[start] {
			continue
		}
		seen[start] = true
		queue = append(queue[:0], int32(start))
		for len(queue) > 0 && taken < want {
			i := queue[0]
			queue = queue[1:]
			side[c.nodes[i]] = 0
			taken++
			for _, u := range c.adj[c.ptr[i]:c.ptr[i+1]] {
				j := c.index[u]
				if !seen[j] {
					seen[j] = true
					queue = append(queue, j)
				}
			}
		}
	}
	for _, v := range c.nodes {
		if side[v] < 0 {
			side[v] = 1
		}
	}
	sizes[0], sizes[1] = 0, 0
	for _, v := range c.nodes {
		sizes[side[v]]++
	}
}

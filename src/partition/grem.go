package partition

import (
	"fmt"

	"sancus/src/graph"
)

// Grem is Armada's GREM: greedy streaming bisection whose earlier
// assignments keep being refined, applied recursively for P parts. Gaps
// filled (shared/design/sancus-notes.md):
//   - the size update "= 1" of the paper's fix_sizes is −1;
//   - the first chunk is seeded by a multilevel bisection in Go (the paper
//     uses METIS there; multilevel.go), not by an external library;
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
		side, err := bisect(s, label, j.label, frac, caps, chunk, max(1, opt.Passes), opt.Seed+uint64(j.label))
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
func bisect(s *graph.EdgeStream, label []int32, want int32, frac float64, capOf [2]int, chunk, passes int, seed uint64) ([]int8, error) {
	n := len(label)
	side := make([]int8, n)
	pos := make([]int32, n)
	for v := range side {
		side[v], pos[v] = -1, -1
	}
	var sizes [2]int
	est := make([][2]float32, n) // running neighbour estimates per side
	first := true
	var src, dst []int32
	flush := func() {
		if len(src) == 0 {
			return
		}
		c := newChunk(src, dst, pos)
		defer c.release()
		if first {
			c.seed(side, &sizes, frac, capOf, seed)
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

// edgeChunk is one in-memory slice of the edge stream as a local graph.
type edgeChunk struct {
	nodes []int32 // local id -> node
	pos   []int32 // node -> local id, -1 outside the chunk (shared, O(|V|))
	g     *wgraph
}

// newChunk renumbers src and dst in place to local ids (the chunk's
// buffers are not needed again) and builds the local graph.
func newChunk(src, dst, pos []int32) *edgeChunk {
	c := &edgeChunk{pos: pos}
	id := func(v int32) int32 {
		if pos[v] < 0 {
			pos[v] = int32(len(c.nodes))
			c.nodes = append(c.nodes, v)
		}
		return pos[v]
	}
	for k := range src {
		src[k], dst[k] = id(src[k]), id(dst[k])
	}
	c.g = chunkGraph(len(c.nodes), src, dst)
	return c
}

// release forgets the chunk's local ids.
func (c *edgeChunk) release() {
	for _, v := range c.nodes {
		c.pos[v] = -1
	}
}

// count is cnt_nbrs for one node: its neighbours in this chunk per side.
func (c *edgeChunk) count(v int32, side []int8) [2]float32 {
	var nb [2]float32
	g, i := c.g, c.pos[v]
	for k := g.ptr[i]; k < g.ptr[i+1]; k++ {
		if s := side[c.nodes[g.adj[k]]]; s >= 0 {
			nb[s] += float32(g.ew[k])
		}
	}
	return nb
}

// seed bisects the chunk with the multilevel partitioner (the paper uses
// METIS here), side 0 taking frac of its nodes.
func (c *edgeChunk) seed(side []int8, sizes *[2]int, frac float64, capOf [2]int, seed uint64) {
	local := multilevelBisect(c.g, frac, capOf, seed)
	sizes[0], sizes[1] = 0, 0
	for i, v := range c.nodes {
		side[v] = local[i]
		sizes[local[i]]++
	}
}

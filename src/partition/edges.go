package partition

import (
	"fmt"
	"math/bits"

	"sancus/src/graph"
)

// Edge partitioners, the streaming baselines CATGNN sets SPRING against
// (its Figure 6): each edge goes to one part, and a vertex is replicated in
// every part holding one of its edges. DBH (Xie et al. 2014) sends an edge
// to the hash of its endpoint of lower degree; HDRF (Petroni et al. 2015)
// scores every part by the endpoints' replicas there, favouring the one of
// higher partial degree, plus a balance term. sancus trains on vertex
// partitions, so a vertex's part is the one holding most of its edges;
// their replication factor is the edge partition's. CATGNN compares SPRING
// with each baseline's partition where "the full neighbor list of each
// node is also maintained": FullReplication reads that as every part
// keeping the whole neighbour list of every vertex it holds.

// EdgeParts is an edge partition's outcome.
type EdgeParts struct {
	// Master is each vertex's part: the one holding most of its edges
	// among those with room (β·|V|/P vertices; none: its hash).
	Master []int32
	// Replication is Σ_v |parts holding an edge of v| / |V|, a vertex
	// without edges counting once.
	Replication float64
	// FullReplication is Σ_q |V_q ∪ N(V_q)| / |V|, V_q the vertices
	// holding an edge in part q: the replicas once each part keeps their
	// full neighbour lists (the measure SPRING's Σ|V_i ∪ N(V_i)|/|V| is).
	FullReplication float64
	Edges           []int64 // edges per part
	// EdgeBalance is the largest part's edges over the mean; MasterBalance
	// the largest part's vertices over the mean where each vertex goes to
	// the part holding most of its edges, before Master caps the parts. A
	// figure far above 1 is a partition a skewed graph or stream order
	// defeated, whatever the rebalanced Master looks like.
	EdgeBalance, MasterBalance float64
}

// PartitionEdges streams the graph's edges (a degree pass first for DBH)
// and gives each edge line that is not a self loop one part; each, if set,
// hears every assignment. State is O(|V|·P): a replica bitset and an edge
// count per vertex and part.
func PartitionEdges(k Kind, s *graph.EdgeStream, p int, opt Options, each func(u, v, part int32)) (EdgeParts, error) {
	n := s.N
	words := (p + 63) / 64
	e := &edgeState{n: n, p: p, words: words, replicas: make([]uint64, n*words), count: make([]int32, n*p),
		out: EdgeParts{Edges: make([]int64, p)}, seed: opt.Seed}
	var pick func(u, v int32) int32
	switch k {
	case KindDBH:
		deg := make([]int32, n)
		if err := s.Each(func(u, v int32) error {
			if err := e.check(u, v); err != nil {
				return err
			}
			if u != v {
				deg[u]++
				deg[v]++
			}
			return nil
		}); err != nil {
			return EdgeParts{}, fmt.Errorf("dbh degrees: %w", err)
		}
		pick = func(u, v int32) int32 {
			low := u // the endpoint of lower degree (ties: the lower id)
			if deg[v] < deg[u] || (deg[v] == deg[u] && v < u) {
				low = v
			}
			return e.hash(low)
		}
	case KindHDRF:
		pick = e.hdrf(max(opt.Balance, 1))
	default:
		return EdgeParts{}, fmt.Errorf("partition: %v is not an edge partitioner (dbh, hdrf)", k)
	}
	if err := s.Each(func(u, v int32) error {
		if err := e.check(u, v); err != nil {
			return err
		}
		if u == v {
			return nil
		}
		q := pick(u, v)
		e.add(u, q)
		e.add(v, q)
		e.out.Edges[q]++
		if each != nil {
			each(u, v, q)
		}
		return nil
	}); err != nil {
		return EdgeParts{}, fmt.Errorf("%v: %w", k, err)
	}
	out := e.finish(max(opt.Balance, 1))
	var err error
	out.FullReplication, err = e.fullReplication(s)
	return out, err
}

// fullReplication streams the edges once more: each endpoint joins every
// part that holds the other, as a neighbour kept with its list.
func (e *edgeState) fullReplication(s *graph.EdgeStream) (float64, error) {
	full := append([]uint64(nil), e.replicas...)
	if err := s.Each(func(u, v int32) error {
		if u == v {
			return nil
		}
		fu, fv := full[int(u)*e.words:(int(u)+1)*e.words], full[int(v)*e.words:(int(v)+1)*e.words]
		ru, rv := e.replicas[int(u)*e.words:(int(u)+1)*e.words], e.replicas[int(v)*e.words:(int(v)+1)*e.words]
		for w := range fu {
			fu[w] |= rv[w]
			fv[w] |= ru[w]
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("full neighbour lists: %w", err)
	}
	var replicas int64
	for v := range e.n {
		k := 0
		for _, w := range full[v*e.words : (v+1)*e.words] {
			k += bits.OnesCount64(w)
		}
		replicas += int64(max(1, k)) // a vertex without edges counts once
	}
	return float64(replicas) / float64(max(1, e.n)), nil
}

type edgeState struct {
	n, p, words int
	replicas    []uint64 // vertex v's parts: bits of replicas[v·words:]
	count       []int32  // count[v·p+q]: v's edges in part q
	out         EdgeParts
	seed        uint64
}

func (e *edgeState) check(u, v int32) error {
	if u < 0 || v < 0 || int(u) >= e.n || int(v) >= e.n {
		return fmt.Errorf("edge (%d,%d) outside %d nodes", u, v, e.n)
	}
	return nil
}

func (e *edgeState) has(v, q int32) bool {
	return e.replicas[int(v)*e.words+int(q)/64]&(1<<(uint(q)%64)) != 0
}

func (e *edgeState) add(v, q int32) {
	e.replicas[int(v)*e.words+int(q)/64] |= 1 << (uint(q) % 64)
	e.count[int(v)*e.p+int(q)]++
}

// hash is a vertex's part by a seeded splitmix64.
func (e *edgeState) hash(v int32) int32 {
	z := uint64(v) + e.seed*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return int32(z % uint64(e.p))
}

// hdrf is HDRF's choice with λ = 1, ε = 1: the part maximizing
// g(u) + g(v) + (maxsize − size)/(ε + maxsize − minsize), where g(x) is
// 1 + (1 − θ_x) if the part holds x (θ_x = δ_x / (δ_u + δ_v), δ the
// partial degrees seen so far); ties go to the lowest part. Among parts
// under a capacity: β times the mean so far, plus one. At λ = 1 the
// balance term (at most 1) cannot outweigh a replica (1 to 2), so on a
// stream whose edges arrive by neighbourhood, as a file's often do, a
// component's edges would follow its first one into one part; the
// capacity keeps every part within β of the mean at every step, and
// HDRF's score still chooses among those with room.
func (e *edgeState) hdrf(beta float64) func(u, v int32) int32 {
	partial := make([]int32, e.n)
	var seen int64
	return func(u, v int32) int32 {
		seen++
		capacity := int64(beta*float64(seen)/float64(e.p)) + 1
		partial[u]++
		partial[v]++
		du, dv := float64(partial[u]), float64(partial[v])
		tu, tv := du/(du+dv), dv/(du+dv)
		maxSize, minSize := e.out.Edges[0], e.out.Edges[0]
		for _, s := range e.out.Edges {
			maxSize, minSize = max(maxSize, s), min(minSize, s)
		}
		best, bestScore := int32(0), -1.0
		for q := range int32(e.p) {
			if e.out.Edges[q] >= capacity {
				continue
			}
			score := float64(maxSize-e.out.Edges[q]) / (1 + float64(maxSize-minSize))
			if e.has(u, q) {
				score += 1 + (1 - tu)
			}
			if e.has(v, q) {
				score += 1 + (1 - tv)
			}
			if score > bestScore {
				best, bestScore = q, score
			}
		}
		return best
	}
}

// finish picks each vertex's part: the one holding most of its edges that
// has room (β·|V|/P vertices), else the least loaded; and counts replicas.
func (e *edgeState) finish(beta float64) EdgeParts {
	e.out.Master = make([]int32, e.n)
	limit := max(1, int(beta*float64(e.n)/float64(e.p)))
	load, wants := make([]int, e.p), make([]int, e.p)
	var replicas int64
	for v := range e.n {
		c := e.count[v*e.p : (v+1)*e.p]
		best, any := -1, false
		most := 0
		for q, k := range c {
			if k > c[most] {
				most = q
			}
		}
		if c[most] > 0 {
			wants[most]++
		}
		for q, k := range c {
			if k > 0 {
				any = true
				if load[q] < limit && (best < 0 || k > c[best]) {
					best = q
				}
			}
		}
		if best < 0 {
			if h := int(e.hash(int32(v))); !any && load[h] < limit {
				best = h
			} else {
				best = 0
				for q := range load {
					if load[q] < load[best] {
						best = q
					}
				}
			}
		}
		e.out.Master[v] = int32(best)
		load[best]++
		if !any {
			replicas++
			continue
		}
		for _, w := range e.replicas[v*e.words : (v+1)*e.words] {
			replicas += int64(bits.OnesCount64(w))
		}
	}
	e.out.Replication = float64(replicas) / float64(max(1, e.n))
	e.out.EdgeBalance, e.out.MasterBalance = balance64(e.out.Edges), balance(wants)
	return e.out
}

func balance64(xs []int64) float64 {
	ints := make([]int, len(xs))
	for i, x := range xs {
		ints[i] = int(x)
	}
	return balance(ints)
}

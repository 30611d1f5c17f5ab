package partition

import (
	"math/rand/v2"
	"slices"
)

// Multilevel bisection of one in-memory chunk: the seed partitioner that
// GREM's paper takes from METIS, written here in Go. The chunk graph is
// coarsened by heavy-edge matching until it is small, the coarsest graph is
// bisected by graph growing from several random seeds, and each level on
// the way back is refined by Fiduccia–Mattheyses (FM) moves. Memory is a
// few copies of the chunk, so GREM stays O(|V| + chunk).

// wgraph is a chunk graph in CSR form with vertex and edge weights (a
// coarse vertex weighs the nodes it stands for, a coarse edge the edges).
type wgraph struct {
	ptr, adj, ew, vw []int32
}

func (g *wgraph) n() int { return len(g.vw) }

const (
	coarsenTo   = 128 // stop coarsening at this many vertices
	initialBFS  = 8   // graph-growing tries on the coarsest graph
	fmPasses    = 8   // FM passes per level (a pass that gains nothing ends them)
	bisectSlack = 0.02
)

// chunkGraph builds the unit-weight graph of a chunk: local ids 0..n-1,
// both directions, no self loops, repeated edges merged into one weight.
func chunkGraph(n int, src, dst []int32) *wgraph {
	deg := make([]int32, n+1)
	for k := range src {
		if src[k] != dst[k] {
			deg[src[k]+1]++
			deg[dst[k]+1]++
		}
	}
	for i := 0; i < n; i++ {
		deg[i+1] += deg[i]
	}
	raw := make([]int32, deg[n])
	fill := append([]int32(nil), deg[:n]...)
	for k := range src {
		a, b := src[k], dst[k]
		if a != b {
			raw[fill[a]] = b
			fill[a]++
			raw[fill[b]] = a
			fill[b]++
		}
	}
	g := &wgraph{ptr: make([]int32, n+1), vw: make([]int32, n),
		adj: make([]int32, 0, len(raw)), ew: make([]int32, 0, len(raw))}
	marker := make([]int32, n)
	for i := range marker {
		marker[i] = -1
	}
	for v := 0; v < n; v++ {
		g.vw[v] = 1
		start := int32(len(g.adj))
		for _, u := range raw[deg[v]:deg[v+1]] {
			g.addEdge(marker, start, u, 1)
		}
		g.ptr[v+1] = int32(len(g.adj))
	}
	return g
}

// addEdge appends an edge to u of weight w to the row being built, which
// starts at start; a repeat of u only adds its weight (marker[u] holds u's
// position once it is in the row).
func (g *wgraph) addEdge(marker []int32, start, u, w int32) {
	if m := marker[u]; m >= start {
		g.ew[m] += w
		return
	}
	marker[u] = int32(len(g.adj))
	g.adj = append(g.adj, u)
	g.ew = append(g.ew, w)
}

// coarsen matches each vertex with its unmatched neighbour of heaviest edge
// (visiting vertices in random order), then pairs up vertices left alone
// that share a neighbour (the leaves around a power-law hub, which no edge
// can pair), and contracts the pairs. cmap maps a vertex to its coarse
// vertex.
func (g *wgraph) coarsen(r *rand.Rand, maxVW int32) (*wgraph, []int32) {
	n := g.n()
	match := make([]int32, n)
	for i := range match {
		match[i] = -1
	}
	perm := r.Perm(n)
	for _, v := range perm {
		if match[v] >= 0 {
			continue
		}
		best, bw := int32(-1), int32(0)
		for k := g.ptr[v]; k < g.ptr[v+1]; k++ {
			u := g.adj[k]
			if match[u] < 0 && u != int32(v) && g.ew[k] > bw && g.vw[v]+g.vw[u] <= maxVW {
				best, bw = u, g.ew[k]
			}
		}
		if best >= 0 {
			match[v], match[best] = best, int32(v)
		}
	}
	cmap := make([]int32, n) // first: a vertex waiting at each neighbour (two-hop pairing)
	for i := range cmap {
		cmap[i] = -1
	}
	for _, v := range perm {
		if match[v] >= 0 || g.ptr[v] == g.ptr[v+1] {
			continue
		}
		h := g.adj[g.ptr[v]]
		if w := cmap[h]; w >= 0 && g.vw[w]+g.vw[v] <= maxVW {
			match[v], match[w], cmap[h] = w, int32(v), -1
		} else {
			cmap[h] = int32(v)
		}
	}
	for i := range cmap {
		cmap[i] = -1
	}
	first, second := make([]int32, 0, n), make([]int32, 0, n)
	for v := range match {
		if cmap[v] >= 0 {
			continue
		}
		c := int32(len(first))
		cmap[v] = c
		first = append(first, int32(v))
		second = append(second, match[v])
		if match[v] >= 0 {
			cmap[match[v]] = c
		}
	}
	cn := len(first)
	cg := &wgraph{ptr: make([]int32, cn+1), vw: make([]int32, cn),
		adj: make([]int32, 0, len(g.adj)), ew: make([]int32, 0, len(g.adj))}
	marker := make([]int32, cn)
	for i := range marker {
		marker[i] = -1
	}
	for c := 0; c < cn; c++ {
		start := int32(len(cg.adj))
		for _, v := range [2]int32{first[c], second[c]} {
			if v < 0 {
				continue
			}
			cg.vw[c] += g.vw[v]
			for k := g.ptr[v]; k < g.ptr[v+1]; k++ {
				cu := cmap[g.adj[k]]
				if cu == int32(c) {
					continue
				}
				cg.addEdge(marker, start, cu, g.ew[k])
			}
		}
		cg.ptr[c+1] = int32(len(cg.adj))
	}
	// Keep only what the coarse edges need: levels are held together.
	cg.adj, cg.ew = slices.Clone(cg.adj), slices.Clone(cg.ew)
	return cg, cmap
}

// multilevelBisect splits g into sides 0 and 1, side 0 holding about frac
// of the vertex weight (each side within bisectSlack of its share and at
// most capOf[s]), with few cut edges.
func multilevelBisect(g *wgraph, frac float64, capOf [2]int, seed uint64) []int8 {
	r := rand.New(rand.NewPCG(seed, 0x6d6c))
	var total int64
	for _, w := range g.vw {
		total += int64(w)
	}
	t0 := int64(frac * float64(total))
	b := sideBounds{target: [2]int64{t0, total - t0}}
	for s := range b.max {
		b.max[s] = min(int64(float64(b.target[s])*(1+bisectSlack))+1, int64(capOf[s]))
	}
	levels, maps := []*wgraph{g}, [][]int32{}
	maxVW := int32(max(1, 3*total/(2*coarsenTo)))
	for cur := g; cur.n() > coarsenTo && len(levels) < 64; {
		cg, cmap := cur.coarsen(r, maxVW)
		if float64(cg.n()) > 0.85*float64(cur.n()) {
			break // matching no longer shrinks the graph (power-law hubs)
		}
		levels, maps, cur = append(levels, cg), append(maps, cmap), cg
	}
	side := levels[len(levels)-1].initialBisect(r, b)
	for i := len(maps) - 1; i >= 0; i-- {
		fine := make([]int8, levels[i].n())
		for v, c := range maps[i] {
			fine[v] = side[c]
		}
		side = fine
		levels[i].fm(side, b)
	}
	return side
}

// sideBounds holds each side's target and maximum vertex weight.
type sideBounds struct{ target, max [2]int64 }

// over is how far the sides' weights exceed their maxima.
func (b sideBounds) over(w [2]int64) int64 {
	return max(0, w[0]-b.max[0]) + max(0, w[1]-b.max[1])
}

// initialBisect grows side 0 by BFS from random seeds, refines each try by
// FM and keeps the best (balanced first, then fewest cut edges).
func (g *wgraph) initialBisect(r *rand.Rand, b sideBounds) []int8 {
	n := g.n()
	var best []int8
	var bestOver, bestCut int64
	tries := initialBFS
	if n > 20*coarsenTo {
		tries = 2 // coarsening stalled: each try is a full FM on a big graph
	}
	for try := 0; try < tries; try++ {
		side := make([]int8, n)
		for i := range side {
			side[i] = 1
		}
		var w0 int64
		queue := make([]int32, 0, n)
		for _, start := range r.Perm(n) {
			if w0 >= b.target[0] {
				break
			}
			if side[start] == 0 {
				continue
			}
			side[start] = 0
			w0 += int64(g.vw[start])
			queue = append(queue[:0], int32(start))
			for len(queue) > 0 && w0 < b.target[0] {
				v := queue[0]
				queue = queue[1:]
				for k := g.ptr[v]; k < g.ptr[v+1] && w0 < b.target[0]; k++ {
					if u := g.adj[k]; side[u] == 1 {
						side[u] = 0
						w0 += int64(g.vw[u])
						queue = append(queue, u)
					}
				}
			}
		}
		g.fm(side, b)
		w, cut := g.weights(side)
		if o := b.over(w); best == nil || o < bestOver || (o == bestOver && cut < bestCut) {
			best, bestOver, bestCut = side, o, cut
		}
	}
	return best
}

// weights returns each side's vertex weight and the cut edge weight.
func (g *wgraph) weights(side []int8) ([2]int64, int64) {
	var w [2]int64
	var cut int64
	for v := range side {
		w[side[v]] += int64(g.vw[v])
		for k := g.ptr[v]; k < g.ptr[v+1]; k++ {
			if side[g.adj[k]] != side[v] {
				cut += int64(g.ew[k])
			}
		}
	}
	return w, cut / 2
}

// fm refines a bisection by Fiduccia–Mattheyses passes: repeatedly move the
// unlocked boundary vertex of highest gain (cut edges saved) whose side may
// give it up, even at a loss, then roll back to the best state seen, which
// is the most balanced and then the one with fewest cut edges.
func (g *wgraph) fm(side []int8, b sideBounds) {
	n := g.n()
	gain := make([]int32, n) // external minus internal edge weight
	ext := make([]int32, n)  // external edge weight (> 0: on the boundary)
	var w [2]int64
	var cut int64
	for v := 0; v < n; v++ {
		w[side[v]] += int64(g.vw[v])
		for k := g.ptr[v]; k < g.ptr[v+1]; k++ {
			if side[g.adj[k]] != side[v] {
				ext[v] += g.ew[k]
				gain[v] += g.ew[k]
			} else {
				gain[v] -= g.ew[k]
			}
		}
		cut += int64(ext[v])
	}
	cut /= 2 // every cut edge was counted from both ends
	locked := make([]bool, n)
	var heaps [2]gainHeap
	move := func(v int32) {
		from := side[v]
		side[v] = 1 - from
		w[from] -= int64(g.vw[v])
		w[1-from] += int64(g.vw[v])
		cut -= int64(gain[v])
		ext[v] -= gain[v] // internal and external swap: ext' = int = ext − gain
		gain[v] = -gain[v]
		for k := g.ptr[v]; k < g.ptr[v+1]; k++ {
			u, e := g.adj[k], g.ew[k]
			if side[u] == from { // u lost an internal neighbour
				gain[u] += 2 * e
				ext[u] += e
			} else {
				gain[u] -= 2 * e
				ext[u] -= e
			}
			if !locked[u] && ext[u] > 0 {
				heaps[side[u]].push(gain[u], u)
			}
		}
	}
	limit := min(max(n/100, 15), 100) // non-improving moves before a pass gives up
	for pass := 0; pass < fmPasses; pass++ {
		heaps[0], heaps[1] = heaps[0][:0], heaps[1][:0]
		for v := 0; v < n; v++ {
			if ext[v] > 0 {
				heaps[side[v]].push(gain[v], int32(v))
			}
		}
		startOver, startCut := b.over(w), cut
		bestOver, bestCut := startOver, startCut
		var moves []int32                // vertices moved in this pass, in order
		best, steps, bestStep := 0, 0, 0 // best: moves kept; steps: vertices tried
		for {
			from := int8(-1)
			switch {
			case w[0] > b.max[0]:
				from = 0
			case w[1] > b.max[1]:
				from = 1
			default:
				g0, ok0 := heaps[0].top(side, gain, locked, 0)
				g1, ok1 := heaps[1].top(side, gain, locked, 1)
				switch {
				case ok0 && (!ok1 || g0 >= g1):
					from = 0
				case ok1:
					from = 1
				}
			}
			if from < 0 {
				break
			}
			v, ok := heaps[from].pop(side, gain, locked, from)
			if !ok {
				break // the heavy side has no boundary vertex left to give
			}
			locked[v] = true
			steps++
			if w[1-from]+int64(g.vw[v]) > b.max[1-from] && w[from] <= b.max[from] {
				continue // would overfill the other side
			}
			move(v)
			moves = append(moves, v)
			if o := b.over(w); o < bestOver || (o == bestOver && cut < bestCut) {
				best, bestStep, bestOver, bestCut = len(moves), steps, o, cut
			} else if steps-bestStep > limit {
				break
			}
		}
		for i := len(moves) - 1; i >= best; i-- {
			move(moves[i])
		}
		clear(locked)
		if bestOver == startOver && bestCut >= startCut {
			break
		}
	}
}

// gainHeap is a max-heap of (gain, vertex) with lazy deletion: an entry is
// current only while its vertex is unlocked, on the heap's side, and has
// that gain.
type gainHeap []struct{ gain, v int32 }

func (h *gainHeap) push(gain, v int32) {
	*h = append(*h, struct{ gain, v int32 }{gain, v})
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p].gain >= a[i].gain {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *gainHeap) drop() {
	a := *h
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, big := 2*i+1, i
		if l < len(a) && a[l].gain > a[big].gain {
			big = l
		}
		if l+1 < len(a) && a[l+1].gain > a[big].gain {
			big = l + 1
		}
		if big == i {
			break
		}
		a[i], a[big] = a[big], a[i]
		i = big
	}
	*h = a
}

// top discards stale entries and reports the best current gain.
func (h *gainHeap) top(side []int8, gain []int32, locked []bool, s int8) (int32, bool) {
	for len(*h) > 0 {
		e := (*h)[0]
		if !locked[e.v] && side[e.v] == s && gain[e.v] == e.gain {
			return e.gain, true
		}
		h.drop()
	}
	return 0, false
}

// pop removes and returns the current vertex of highest gain.
func (h *gainHeap) pop(side []int8, gain []int32, locked []bool, s int8) (int32, bool) {
	if _, ok := h.top(side, gain, locked, s); !ok {
		return 0, false
	}
	v := (*h)[0].v
	h.drop()
	return v, true
}

package partition

import (
	"fmt"
	"sort"

	"sancus/src/graph"
)

// Spring is CATGNN's SPRING (Algorithm 1), with the gaps in the published
// pseudocode filled as shared/design/sancus-notes.md says:
//   - one extra pass counts degrees first;
//   - a node moves only between different clusters (c_u ≠ c_v), and only
//     while both volumes are at most τ_vol (default 2|E|/P: a cluster never
//     grows past a part's share of the volume);
//   - the richest neighbour is updated on every edge, not only inside the
//     volume test; every cluster's representative starts as its first node;
//   - isolated nodes never appear in the stream: they become singletons;
//   - merging processes clusters once in ascending size (merged clusters are
//     not re-ranked), following each representative's richest neighbour
//     through earlier merges;
//   - the final greedy assignment (largest cluster first, to the least loaded
//     part) never overfills a part: a cluster that does not fit is split.
//
// State is O(|V|): degree, cluster, richest neighbour per node; volume, size
// and representative per cluster.
func Spring(s *graph.EdgeStream, p int, opt Options) ([]int32, error) {
	n := s.N
	deg := make([]int32, n)
	var m int64
	if err := s.Each(func(u, v int32) error {
		if int(u) >= n || int(v) >= n {
			return fmt.Errorf("edge (%d,%d) outside %d nodes", u, v, n)
		}
		if u != v {
			deg[u]++
			deg[v]++
			m++
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("spring: degree pass: %w", err)
	}
	tau := opt.TauVol
	if tau <= 0 {
		tau = 2 * float64(m) / float64(p)
	}
	cl := make([]int32, n) // cluster+1; 0 = unseen
	vol := make([]int64, n+1)
	richest := make([]int32, n)
	for i := range richest {
		richest[i] = int32(i)
	}
	k := int32(0)
	newCluster := func(u int32) {
		k++
		cl[u] = k
		vol[k] += int64(deg[u])
	}
	if err := s.Each(func(u, v int32) error {
		if u == v {
			return nil
		}
		if cl[u] == 0 {
			newCluster(u)
		}
		if cl[v] == 0 {
			newCluster(v)
		}
		cu, cv := cl[u], cl[v]
		if cu != cv && float64(vol[cu]) <= tau && float64(vol[cv]) <= tau {
			if vol[cu] <= vol[cv] { // move u into v's (larger) cluster
				vol[cu] -= int64(deg[u])
				vol[cv] += int64(deg[u])
				cl[u] = cv
			} else {
				vol[cv] -= int64(deg[v])
				vol[cu] += int64(deg[v])
				cl[v] = cu
			}
		}
		if deg[richest[u]] < deg[v] {
			richest[u] = v
		}
		if deg[richest[v]] < deg[u] {
			richest[v] = u
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("spring: clustering pass: %w", err)
	}
	for v := range cl {
		if cl[v] == 0 { // isolated node
			newCluster(int32(v))
		}
	}
	nc := int(k) + 1
	size := make([]int, nc)
	rep := make([]int32, nc)
	for i := range rep {
		rep[i] = -1
	}
	for v := 0; v < n; v++ {
		c := cl[v]
		size[c]++
		if rep[c] < 0 || deg[richest[rep[c]]] < deg[richest[v]] {
			rep[c] = int32(v)
		}
	}
	// Merge, smallest clusters first, into the cluster of the representative's
	// richest neighbour (union-find tracks earlier merges).
	parent := make([]int32, nc)
	for i := range parent {
		parent[i] = int32(i)
	}
	var find func(c int32) int32
	find = func(c int32) int32 {
		for parent[c] != c {
			parent[c] = parent[parent[c]]
			c = parent[c]
		}
		return c
	}
	order := make([]int, 0, nc)
	for c := 1; c < nc; c++ {
		if size[c] > 0 {
			order = append(order, c)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return size[order[a]] < size[order[b]] })
	capacity := opt.Balance * float64(n) / float64(p)
	for _, c := range order {
		i := find(int32(c))
		if rep[i] < 0 {
			continue
		}
		t := find(cl[richest[rep[i]]])
		if t != i && float64(size[i]+size[t]) <= capacity {
			parent[i] = t
			size[t] += size[i]
			size[i] = 0
			if deg[richest[rep[i]]] > deg[richest[rep[t]]] {
				rep[t] = rep[i]
			}
		}
	}
	final := make([]int32, n)
	for v := range final {
		final[v] = find(cl[v])
	}
	return assignClusters(final, nc, p, capacity), nil
}

// assignClusters places clusters on parts, largest first, each on the least
// loaded part; a cluster that would overfill its part is split across parts.
func assignClusters(cluster []int32, nc, p int, capacity float64) []int32 {
	members := make([][]int32, nc)
	for v, c := range cluster {
		members[c] = append(members[c], int32(v))
	}
	sizes := make([]int, nc)
	for c := range members {
		sizes[c] = len(members[c])
	}
	load := make([]int, p)
	limit := int(capacity)
	if limit*p < len(cluster) {
		limit = (len(cluster) + p - 1) / p
	}
	least := func() int {
		t := 0
		for q := 1; q < p; q++ {
			if load[q] < load[t] {
				t = q
			}
		}
		return t
	}
	parts := make([]int32, len(cluster))
	for _, c := range sortedByDesc(sizes) {
		cur := least()
		for _, v := range members[c] {
			if load[cur] >= limit { // the part is full: the rest of the cluster moves on
				cur = least()
			}
			parts[v] = int32(cur)
			load[cur]++
		}
	}
	return parts
}

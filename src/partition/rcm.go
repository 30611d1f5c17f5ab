package partition

import (
	"sancus/kernels/matrix"
	"sort"
)

// RCM returns the reverse Cuthill–McKee order of a symmetric graph: perm[i]
// is the node placed at position i. Breadth-first from a low-degree node,
// neighbours by ascending degree, reversed: adjacent nodes get nearby
// numbers, so a product with Â gathers rows of H from nearby memory. It is
// a single-rank locality order (the partitioners are for P > 1).
func RCM(adj *matrix.CSR) []int32 {
	n := adj.Rows
	deg := func(v int32) int64 { return adj.RowPtr[v+1] - adj.RowPtr[v] }
	starts := make([]int32, n)
	for v := range starts {
		starts[v] = int32(v)
	}
	sort.SliceStable(starts, func(a, b int) bool { return deg(starts[a]) < deg(starts[b]) })
	visited := make([]bool, n)
	order := make([]int32, 0, n)
	var nb []int32
	for _, s := range starts {
		if visited[s] {
			continue
		}
		visited[s] = true
		order = append(order, s)
		for head := len(order) - 1; head < len(order); head++ {
			v := order[head]
			nb = nb[:0]
			for p := adj.RowPtr[v]; p < adj.RowPtr[v+1]; p++ {
				if u := adj.ColIdx[p]; !visited[u] {
					visited[u] = true
					nb = append(nb, u)
				}
			}
			sort.Slice(nb, func(a, b int) bool {
				da, db := deg(nb[a]), deg(nb[b])
				return da < db || (da == db && nb[a] < nb[b])
			})
			order = append(order, nb...)
		}
	}
	for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
		order[i], order[j] = order[j], order[i]
	}
	return order
}

package partition

import (
	"math/rand/v2"
	"sancus/kernels/matrix"
	"testing"
)

// A path whose nodes are numbered at random has bandwidth ~n; RCM must
// renumber it so every edge joins consecutive positions.
func TestRCMRestoresAPath(t *testing.T) {
	const n = 500
	label := rand.New(rand.NewPCG(1, 1)).Perm(n)
	nbrs := make([][]int32, n)
	for i := 0; i+1 < n; i++ {
		a, b := int32(label[i]), int32(label[i+1])
		nbrs[a] = append(nbrs[a], b)
		nbrs[b] = append(nbrs[b], a)
	}
	adj := &matrix.CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1)}
	for v, ns := range nbrs {
		for _, u := range ns {
			adj.ColIdx = append(adj.ColIdx, u)
			adj.Val = append(adj.Val, 1)
		}
		adj.RowPtr[v+1] = int64(len(adj.ColIdx))
	}
	perm := RCM(adj)
	pos := make([]int, n)
	seen := make([]bool, n)
	for i, v := range perm {
		if seen[v] {
			t.Fatalf("node %d placed twice", v)
		}
		seen[v] = true
		pos[v] = i
	}
	for v, ns := range nbrs {
		for _, u := range ns {
			if d := pos[v] - pos[u]; d != 1 && d != -1 {
				t.Fatalf("edge %d–%d ends %d positions apart", v, u, d)
			}
		}
	}
}

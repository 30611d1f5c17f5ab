package partition

import (
	"fmt"

	"sancus/src/graph"
)

// Refine improves a partition by streaming label propagation: each pass
// streams the edges once to count every node's neighbours per part
// (O(|V|·P) state), then moves each node to the part holding most of its
// neighbours when that gains edges and the part has room (β·|V|/P). It stops
// after passes passes or when nothing moves.
func Refine(s *graph.EdgeStream, parts []int32, p int, balance float64, passes int) error {
	n := len(parts)
	limit := int(balance * float64(n) / float64(p))
	sizes := make([]int, p)
	for _, q := range parts {
		sizes[q]++
	}
	cnt := make([]int32, n*p)
	for pass := 0; pass < passes; pass++ {
		clear(cnt)
		if err := s.Each(func(u, v int32) error {
			if int(u) >= n || int(v) >= n {
				return fmt.Errorf("edge (%d,%d) outside %d nodes", u, v, n)
			}
			if u != v {
				cnt[int(u)*p+int(parts[v])]++
				cnt[int(v)*p+int(parts[u])]++
			}
			return nil
		}); err != nil {
			return fmt.Errorf("refine: %w", err)
		}
		moved := 0
		for v := 0; v < n; v++ {
			c := cnt[v*p : (v+1)*p]
			cur := parts[v]
			best := cur
			for q := 0; q < p; q++ {
				if c[q] > c[best] && sizes[q] < limit {
					best = int32(q)
				}
			}
			if best != cur {
				parts[v] = best
				sizes[cur]--
				sizes[best]++
				moved++
			}
		}
		if moved == 0 {
			break
		}
	}
	return nil
}

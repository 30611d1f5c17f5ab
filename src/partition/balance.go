package partition

import (
	"fmt"
	"slices"

	"sancus/src/graph"
)

// BalanceBy is what a partition's parts are made equal in.
type BalanceBy uint8

const (
	// BalanceAuto is BalanceNNZ where a partition equal in rows is more
	// than 10% unequal in nonzeros (skewed degrees), else BalanceRows.
	BalanceAuto BalanceBy = iota
	BalanceRows           // nodes (β bounds the largest part)
	BalanceNNZ            // nonzeros of Â: a row's degree + 1
)

// ParseBalanceBy reads auto, rows or nnz.
func ParseBalanceBy(s string) (BalanceBy, error) {
	switch s {
	case "auto", "":
		return BalanceAuto, nil
	case "rows":
		return BalanceRows, nil
	case "nnz":
		return BalanceNNZ, nil
	}
	return 0, fmt.Errorf("balance by %q: auto, rows or nnz", s)
}

func (b BalanceBy) String() string { return [...]string{"auto", "rows", "nnz"}[b] }

// autoNNZ is where BalanceAuto turns to nonzeros: max/mean above it.
const autoNNZ = 1.10

// BalanceNonzeros moves nodes out of parts whose nonzeros of Â (degree + 1
// per row) exceed the mean by more than tol, least attached to their part
// first, each to the part with fewest nonzeros that it does not push past
// the bound; a node too heavy to fit anywhere stays. One pass over the
// edges counts degrees and each node's neighbours in its own part. With
// BalanceAuto it moves nothing unless the nonzeros' max/mean exceeds 1.10.
// It reports that max/mean before and after; BalanceRows reads nothing and
// reports 0, 0.
func BalanceNonzeros(s *graph.EdgeStream, parts []int32, p int, by BalanceBy, tol float64) (before, after float64, err error) {
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
	load := make([]int64, p)
	var total int64
	for v, q := range parts {
		load[q] += int64(deg[v]) + 1
		total += int64(deg[v]) + 1
	}
	mean := float64(total) / float64(p)
	ratio := func() float64 { return float64(slices.Max(load)) / mean }
	before = ratio()
	if by == BalanceAuto && before <= autoNNZ {
		return before, before, nil
	}
	limit := int64(mean * (1 + tol))
	members := make([][]int32, p)
	for v, q := range parts {
		if load[q] > limit {
			members[q] = append(members[q], int32(v))
		}
	}
	for q := range p {
		// Least attached first (the cut grows least), lighter first on ties.
		slices.SortStableFunc(members[q], func(a, b int32) int {
			fa := float64(inside[a]) / float64(deg[a]+1)
			fb := float64(inside[b]) / float64(deg[b]+1)
			switch {
			case fa < fb:
				return -1
			case fa > fb:
				return 1
			}
			return int(deg[a]) - int(deg[b])
		})
		for _, v := range members[q] {
			if load[q] <= limit {
				break
			}
			w := int64(deg[v]) + 1
			to := -1
			for r := range p {
				if r != q && load[r]+w <= limit && (to < 0 || load[r] < load[to]) {
					to = r
				}
			}
			if to < 0 {
				continue
			}
			parts[v] = int32(to)
			load[q] -= w
			load[to] += w
		}
	}
	return before, ratio(), nil
}

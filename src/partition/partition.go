// Package partition assigns every node of a graph to one of P parts:
// contiguous ranges, random, the streaming SPRING (CATGNN) and GREM
// (Armada) algorithms, the streaming edge partitioners DBH and HDRF
// (edges.go), ByteGNN's split-balanced blocks (bytegnn.go), or a file of
// part ids (e.g. METIS's gpmetis). The
// streaming ones read the edge file in passes and keep O(|V|) state. A
// partition becomes a node order (part by part) plus P row ranges, which
// is how shards are cut.
package partition

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"sancus/src/graph"
)

// Options tune the partitioners.
type Options struct {
	Seed       uint64
	Balance    float64 // β: a part holds at most β·|V|/P nodes (SPRING, GREM, ByteGNN)
	ChunkEdges int     // GREM: edges per in-memory chunk
	Passes     int     // GREM: passes over the edge stream per bisection (1 = the paper)
	TauVol     float64 // SPRING: cluster volume threshold (0: 2|E|/P)
	File       string  // "file": one part id per line
	Refine     int     // passes of streaming label-propagation refinement after spring/grem (0: none)
	Hops       int     // ByteGNN: hops of a block around its centre (0: 2, a 2-layer GNN's)
	Splits     Splits  // ByteGNN: the split whose counts it balances
}

// Splits are a dataset's training, validation and test nodes.
type Splits struct{ Train, Val, Test []int32 }

// DefaultOptions are the values the papers use (β = 1.05).
func DefaultOptions() Options { return Options{Seed: 1, Balance: 1.05, ChunkEdges: 1 << 20, Passes: 1} }

// Run parses name and partitions (see Partition).
func Run(name string, s *graph.EdgeStream, p int, opt Options) ([]int32, error) {
	k, err := ParseKind(name)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	return Partition(k, s, p, opt)
}

// Partition assigns each node of the stream's graph to a part in [0, p).
// KindContiguous returns nil: keep the node order (rows are cut by nonzeros
// at shard time).
func Partition(k Kind, s *graph.EdgeStream, p int, opt Options) ([]int32, error) {
	if p < 1 || p > s.N {
		return nil, fmt.Errorf("partition: cannot make %d parts of %d nodes", p, s.N)
	}
	if opt.Balance < 1 {
		opt.Balance = 1.05
	}
	var parts []int32
	var err error
	switch k {
	case KindContiguous:
		return nil, nil
	case KindRandom:
		return Random(s.N, p, opt.Seed), nil
	case KindSpring:
		parts, err = Spring(s, p, opt)
	case KindGrem:
		parts, err = Grem(s, p, opt)
	case KindDBH, KindHDRF:
		ep, err := PartitionEdges(k, s, p, opt, nil)
		return ep.Master, err
	case KindFile:
		return ReadFile(opt.File, s.N, p)
	case KindByteGNN:
		return BlocksBySplit(s, p, opt)
	default:
		return nil, fmt.Errorf("partition: unknown partitioner %v", k)
	}
	if err == nil && k.Refines() && opt.Refine > 0 {
		err = Refine(s, parts, p, opt.Balance, opt.Refine)
	}
	return parts, err
}

// Random deals nodes to parts in a seeded random order, equal sizes ±1.
func Random(n, p int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 0x9a27))
	perm := r.Perm(n)
	parts := make([]int32, n)
	for i, v := range perm {
		parts[v] = int32(i * p / n)
	}
	return parts
}

// ReadFile reads one part id per line (gpmetis output).
func ReadFile(path string, n, p int) ([]int32, error) {
	if path == "" {
		return nil, fmt.Errorf("partition file: no --parts-file given")
	}
	lab, err := graph.ReadLabels(path, n) // same format: one integer per line
	if err != nil {
		return nil, fmt.Errorf("partition file: %w", err)
	}
	for i, v := range lab {
		if v < 0 || int(v) >= p {
			return nil, fmt.Errorf("partition file %s:%d: part %d outside 0..%d", path, i+1, v, p-1)
		}
	}
	return lab, nil
}

// Check verifies a partition: every node in a part, sizes within the bound.
func Check(parts []int32, p int, balance float64) error {
	sizes := make([]int, p)
	for v, q := range parts {
		if q < 0 || int(q) >= p {
			return fmt.Errorf("node %d in part %d, outside 0..%d", v, q, p-1)
		}
		sizes[q]++
	}
	limit := balance * float64(len(parts)) / float64(p)
	for q, s := range sizes {
		if float64(s) > limit+1 {
			return fmt.Errorf("part %d holds %d nodes, over the bound %.0f (β=%g)", q, s, limit, balance)
		}
	}
	return nil
}

// sortedByDesc returns indices of xs sorted by value, largest first, ties
// by index (deterministic).
func sortedByDesc(xs []int) []int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] > xs[idx[b]] })
	return idx
}

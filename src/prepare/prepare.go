// Package prepare cuts a dataset into the shards of P ranks: the node
// order of a partition, Â normalized, ÂX precomputed, contiguous row
// ranges, each rank's block row as P column blocks; in memory (InMemory)
// or streaming the edge list from disk (Streaming). src/shard is
// the file format it writes.
package prepare

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"

	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/shard"
)

// BalancedRanges splits the rows of Â into parts contiguous ranges holding
// about the same work: each row weighs its nonzeros plus one, since SpMM cost
// follows nonzeros and dense per-row work follows rows.
func BalancedRanges(ahat *matrix.CSR, parts int) ([]int64, error) {
	n := ahat.Rows
	if parts < 1 || parts > n {
		return nil, fmt.Errorf("cannot split %d rows into %d parts", n, parts)
	}
	total := ahat.NNZ() + int64(n)
	off := make([]int64, parts+1)
	r := 0
	for p := 1; p < parts; p++ {
		target := total * int64(p) / int64(parts)
		for r < n && ahat.RowPtr[r]+int64(r) < target {
			r++
		}
		// Leave at least one row for every remaining part.
		r = max(r, int(off[p-1])+1)
		r = min(r, n-(parts-p))
		off[p] = int64(r)
	}
	off[parts] = int64(n)
	return off, nil
}

// Options control how shards are cut.
type Options struct {
	Precompute shard.Aggregation // the products with X to store, so layer 1 needs no communication
	// Parts assigns each node to a rank (from a partitioner); nil keeps the
	// node order and cuts contiguous ranges balanced by nonzeros.
	Parts []int32
	// OnShard, if set, sees every shard Streaming writes.
	OnShard func(s *shard.Shard)
	// Clusters, if set, gives each node (original id) its cluster, kept in
	// the shards for cluster-batch training; NumClusters counts them.
	Clusters    []int32
	NumClusters int
	// Source says what was read and how (the files and their sizes, the
	// loader's flags): it goes into Shard.Set.
	Source string
	// Progress, if set, hears how far Streaming's passes have come
	// (total ≤ 0 where it is not known yet).
	Progress func(stage, unit string, done, total int64)
	// Nodes, if set, is the dataset's node data (labels, features, split)
	// as Streaming would read it with its LoadOptions, already read by a
	// partitioner that needed the split: Streaming does not read it again.
	Nodes *graph.Dataset
}

// report tells Progress, if set.
func (opt Options) report(stage, unit string, done, total int64) {
	if opt.Progress != nil {
		opt.Progress(stage, unit, done, total)
	}
}

// identity is the Set of the shards a preparation cuts from ds.
func (opt Options) identity(ds *graph.Dataset, off []int64, ids []int32) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%d|%d|%d|%d|%d/%d/%d|%v|%d|%v|", opt.Source, ds.Name, ds.N, ds.Classes, ds.Features.Cols, ds.Features.NNZ(),
		len(ds.Train), len(ds.Val), len(ds.Test), opt.Precompute, opt.NumClusters, off)
	binary.Write(h, binary.LittleEndian, ids)
	binary.Write(h, binary.LittleEndian, opt.Clusters)
	binary.Write(h, binary.LittleEndian, ds.Labels)
	return h.Sum64()
}

// Split cuts one rank's shard out of a whole dataset whose normalized
// adjacency is ahat and (optionally) ÂX is ax.
func Split(ds *graph.Dataset, ahat *matrix.CSR, products Products, off []int64, ids []int32, rank int) (*shard.Shard, error) {
	parts := len(off) - 1
	if rank < 0 || rank >= parts {
		return nil, fmt.Errorf("rank %d outside 0..%d", rank, parts-1)
	}
	lo, hi := int(off[rank]), int(off[rank+1])
	return newShard(ds, columnBlocks(ahat.RowSlice(lo, hi), off), products.rows(lo, hi), off, ids, rank), nil
}

// Products are the whole graph's precomputed ÂX and D⁻¹AX (nil where not
// asked for), or one shard's rows of them.
type Products struct{ AX, MX *matrix.CSR }

func (p Products) rows(lo, hi int) Products {
	slice := func(m *matrix.CSR) *matrix.CSR {
		if m == nil {
			return nil
		}
		return m.RowSlice(lo, hi)
	}
	return Products{slice(p.AX), slice(p.MX)}
}

// products forms the products of X that opt asks for from rows of Â cut
// into column blocks (blocks[own] holding the diagonal).
func (opt Options) products(blocks []*matrix.CSR, off []int64, own int, x *matrix.CSR) (Products, error) {
	var p Products
	var err error
	if opt.Precompute&shard.Sym != 0 {
		if p.AX, err = graph.SpGEMMBlocks(blocks, off, x); err != nil {
			return p, err
		}
	}
	if opt.Precompute&shard.Mean != 0 {
		p.MX, err = graph.SpGEMMBlocks(meanBlocks(blocks, own), off, x)
	}
	return p, err
}

// meanBlocks are the same rows of M = D⁻¹A, the neighbours' mean: Â's
// pattern less its self loops, each entry 1/deg(A) (a row without
// neighbours stays empty).
func meanBlocks(blocks []*matrix.CSR, own int) []*matrix.CSR {
	rows, w := blocks[0].Rows, graph.MeanWeights(blocks)
	out := make([]*matrix.CSR, len(blocks))
	for j, b := range blocks {
		m := &matrix.CSR{Rows: rows, Cols: b.Cols, RowPtr: make([]int64, rows+1), ColIdx: make([]int32, 0, b.NNZ()), Val: make([]float32, 0, b.NNZ())}
		for r := range rows {
			for p := b.RowPtr[r]; p < b.RowPtr[r+1]; p++ {
				if c := b.ColIdx[p]; j != own || int(c) != r { // Â's self loop is no neighbour
					m.ColIdx, m.Val = append(m.ColIdx, c), append(m.Val, w[r])
				}
			}
			m.RowPtr[r+1] = int64(len(m.ColIdx))
		}
		out[j] = m
	}
	return out
}

// newShard assembles rank's shard from its rows of Â and of the products
// (nil where not precomputed), columns global; ids are the original node
// ids in the prepared order (nil: unchanged).
func newShard(ds *graph.Dataset, blocks []*matrix.CSR, products Products, off []int64, ids []int32, rank int) *shard.Shard {
	lo, hi := int(off[rank]), int(off[rank+1])
	s := &shard.Shard{Rank: rank, Parts: len(off) - 1, N: ds.N, Offsets: off, Classes: ds.Classes, FeatDim: ds.Features.Cols}
	s.Blocks = blocks
	s.Features = ds.Features.RowSlice(lo, hi)
	s.AX.CSR, s.MX.CSR = products.AX, products.MX
	s.Labels = append([]int32(nil), ds.Labels[lo:hi]...)
	if ds.Multi != nil {
		s.Multi = ds.Multi.RowSlice(lo, hi)
	}
	if ids != nil {
		s.NodeIDs = append([]int32(nil), ids[lo:hi]...)
	}
	local := func(set []int32) []int32 {
		var out []int32
		for _, v := range set {
			if int(v) >= lo && int(v) < hi {
				out = append(out, v-int32(lo))
			}
		}
		return out
	}
	s.Train, s.Val, s.Test = local(ds.Train), local(ds.Val), local(ds.Test)
	s.GlobalTrain = len(ds.Train)
	return s
}

// columnBlocks cuts a row block into one CSR per column range, with column
// ids made local to the range (columns are sorted, so each row's entries for
// block j are contiguous).
func columnBlocks(a *matrix.CSR, off []int64) []*matrix.CSR {
	parts := len(off) - 1
	blocks := make([]*matrix.CSR, parts)
	for j := range blocks {
		blocks[j] = &matrix.CSR{Rows: a.Rows, Cols: int(off[j+1] - off[j]), RowPtr: make([]int64, a.Rows+1)}
	}
	// Counted first, so every block is allocated once at its size.
	each := func(f func(r, j int, c int32, v float32)) {
		for r := 0; r < a.Rows; r++ {
			j := 0
			for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
				c := int64(a.ColIdx[p])
				for c >= off[j+1] {
					j++
				}
				f(r, j, int32(c-off[j]), a.Val[p])
			}
		}
	}
	each(func(r, j int, _ int32, _ float32) { blocks[j].RowPtr[r+1]++ })
	for _, b := range blocks {
		for r := 0; r < a.Rows; r++ {
			b.RowPtr[r+1] += b.RowPtr[r]
		}
		b.ColIdx, b.Val = make([]int32, b.RowPtr[a.Rows]), make([]float32, b.RowPtr[a.Rows])
	}
	next := make([][]int64, parts)
	for j, b := range blocks {
		next[j] = append([]int64(nil), b.RowPtr[:a.Rows]...)
	}
	each(func(r, j int, c int32, v float32) {
		k := next[j][r]
		blocks[j].ColIdx[k], blocks[j].Val[k] = c, v
		next[j][r]++
	})
	return blocks
}

// Prepared is a dataset made ready for splitting: Â, ÂX and row ranges,
// in the partition's node order.
type Prepared struct {
	DS   *graph.Dataset
	AHat *matrix.CSR
	Products
	Offsets []int64
	IDs     []int32 // IDs[new] = original node id (nil: original order)
	Set     uint64  // the shards' Shard.Set
	nnz     int64   // nonzeros of Â (streaming preparation, where AHat is not kept)
	opt     Options
	// compulsory is what streaming preparation must hold at once: the
	// largest part's rows of Â and of the products, and the features.
	compulsory int64
}

// CompulsoryMB is the memory streaming preparation must hold at once (0
// for InMemory).
func (p *Prepared) CompulsoryMB() float64 { return float64(p.compulsory) / (1 << 20) }

// NNZ is the number of nonzeros of Â.
func (p *Prepared) NNZ() int64 {
	if p.AHat != nil {
		return p.AHat.NNZ()
	}
	return p.nnz
}

// InMemory orders the nodes by part (if a partition is given), normalizes
// the adjacency, optionally precomputes ÂX, and fixes the row ranges.
func InMemory(ds *graph.Dataset, parts int, opt Options) (*Prepared, error) {
	var off []int64
	var perm []int32
	if opt.Parts != nil {
		if len(opt.Parts) != ds.N {
			return nil, fmt.Errorf("dataset %s: partition covers %d nodes, graph has %d", ds.Name, len(opt.Parts), ds.N)
		}
		perm, off = orderByPart(opt.Parts, parts)
		for q := 0; q < parts; q++ {
			if off[q+1] == off[q] {
				return nil, fmt.Errorf("dataset %s: part %d of the partition is empty", ds.Name, q)
			}
		}
		ds = Reorder(ds, perm)
	}
	ahat := graph.Normalize(ds.Adj)
	if off == nil {
		var err error
		if off, err = BalancedRanges(ahat, parts); err != nil {
			return nil, fmt.Errorf("dataset %s: %w", ds.Name, err)
		}
	}
	p := &Prepared{DS: ds, AHat: ahat, Offsets: off, IDs: perm, opt: opt, Set: opt.identity(ds, off, perm)}
	var err error
	p.Products, err = opt.products([]*matrix.CSR{ahat}, []int64{0, int64(ds.N)}, 0, ds.Features)
	return p, err
}

// Shard returns rank r's shard.
func (p *Prepared) Shard(r int) (*shard.Shard, error) {
	s, err := Split(p.DS, p.AHat, p.Products, p.Offsets, p.IDs, r)
	if err == nil {
		p.opt.attachClusters(s, p.IDs)
		s.Set = p.Set
	}
	return s, err
}

// Shards returns every rank's shard, in rank order.
func (p *Prepared) Shards() ([]*shard.Shard, error) {
	out := make([]*shard.Shard, len(p.Offsets)-1)
	for r := range out {
		var err error
		if out[r], err = p.Shard(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// attachClusters gives a shard its rows' clusters (perm: the prepared
// order's original ids; nil: unchanged).
func (opt Options) attachClusters(s *shard.Shard, perm []int32) {
	if opt.Clusters == nil {
		return
	}
	s.NumClusters, s.Clusters = opt.NumClusters, make([]int32, s.Rows())
	for r := range s.Clusters {
		id := s.Row0() + r
		if perm != nil {
			id = int(perm[id])
		}
		s.Clusters[r] = opt.Clusters[id]
	}
}

// ClusterRanks spreads k clusters over parts ranks, largest first onto the
// rank with the fewest rows so far, and returns each node's rank: every
// rank's rows are whole clusters, and a random batch of clusters touches
// every rank about equally.
func ClusterRanks(clusters []int32, k, parts int) ([]int32, error) {
	if k < parts {
		return nil, fmt.Errorf("%d clusters cannot cover %d ranks", k, parts)
	}
	size := make([]int, k)
	for v, c := range clusters {
		if c < 0 || int(c) >= k {
			return nil, fmt.Errorf("node %d: cluster %d outside 0..%d", v, c, k-1)
		}
		size[c]++
	}
	order := make([]int, k)
	for c := range order {
		order[c] = c
	}
	slices.SortStableFunc(order, func(a, b int) int { return size[b] - size[a] })
	load, rank := make([]int, parts), make([]int32, k)
	for _, c := range order {
		r := slices.Index(load, slices.Min(load))
		rank[c], load[r] = int32(r), load[r]+size[c]
	}
	out := make([]int32, len(clusters))
	for v, c := range clusters {
		out[v] = rank[c]
	}
	return out, nil
}

// orderByPart lists nodes part by part (ids ascending within a part).
func orderByPart(parts []int32, p int) (perm []int32, off []int64) {
	off = make([]int64, p+1)
	for _, q := range parts {
		off[q+1]++
	}
	for i := 0; i < p; i++ {
		off[i+1] += off[i]
	}
	next := append([]int64(nil), off[:p]...)
	perm = make([]int32, len(parts))
	for v, q := range parts {
		perm[next[q]] = int32(v)
		next[q]++
	}
	return perm, off
}

// Reorder returns the dataset with node perm[i] renamed i.
func Reorder(ds *graph.Dataset, perm []int32) *graph.Dataset {
	n := ds.N
	inv := make([]int32, n)
	for i, v := range perm {
		inv[v] = int32(i)
	}
	out := &graph.Dataset{Name: ds.Name, N: n, Classes: ds.Classes}
	out.Adj = permuteCSR(ds.Adj, perm, inv, true)
	out.Features = permuteCSR(ds.Features, perm, inv, false)
	if ds.Multi != nil {
		out.Multi = permuteCSR(ds.Multi, perm, inv, false)
	}
	out.Labels = make([]int32, n)
	for i, v := range perm {
		out.Labels[i] = ds.Labels[v]
	}
	mapIDs := func(xs []int32) []int32 {
		o := make([]int32, len(xs))
		for k, v := range xs {
			o[k] = inv[v]
		}
		return o
	}
	out.Train, out.Val, out.Test = mapIDs(ds.Train), mapIDs(ds.Val), mapIDs(ds.Test)
	return out
}

// permuteCSR reorders rows (and, for a square graph, columns) of a.
func permuteCSR(a *matrix.CSR, perm, inv []int32, cols bool) *matrix.CSR {
	out := &matrix.CSR{Rows: a.Rows, Cols: a.Cols, RowPtr: make([]int64, a.Rows+1)}
	out.ColIdx = make([]int32, 0, a.NNZ())
	out.Val = make([]float32, 0, a.NNZ())
	type ent struct {
		c int32
		v float32
	}
	var row []ent
	for i, old := range perm {
		row = row[:0]
		for p := a.RowPtr[old]; p < a.RowPtr[old+1]; p++ {
			c := a.ColIdx[p]
			if cols {
				c = inv[c]
			}
			row = append(row, ent{c, a.Val[p]})
		}
		if cols {
			slices.SortFunc(row, func(x, y ent) int { return int(x.c) - int(y.c) })
		}
		for _, e := range row {
			out.ColIdx = append(out.ColIdx, e.c)
			out.Val = append(out.Val, e.v)
		}
		out.RowPtr[i+1] = int64(len(out.ColIdx))
	}
	return out
}

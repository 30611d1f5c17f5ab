// Package sample draws mini-batches of sampled k-hop neighbourhoods across
// ranks, as DistDGL's sampler does, and builds the per-layer bipartite
// blocks (message-flow graphs) a trainer computes on alone.
//
// A vertex's neighbours are sampled by the rank that owns its row: a rank
// sends each owner the vertices of its frontier, the owner answers with
// their sampled neighbours and edge weights, and the neighbours join the
// frontier of the layer below (one batched all-to-all each way per layer;
// every rank takes part in every exchange, with nothing to send or not).
// The features of the bottom layer's vertices then come from their owners
// in one more exchange, in the wire's format, and the seeds' labels come
// with the top layer's answers.
//
// Sampling is a pure function of (seed, step, layer, vertex, neighbour):
// a vertex keeps the k of its d neighbours with the smallest hash of that
// key, over original node ids. So a vertex is sampled alike on every rank
// and at any P, a run repeats bit for bit, and with k ≥ d every neighbour
// is kept. Weights make full fanout the whole graph's operator: a GCN's
// edge carries Â's value times d/k (its self loop always kept, with Â's
// value), GraphSAGE's the mean 1/k over the sampled neighbours.
package sample

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
	"unsafe"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/kernels/matrix"
	"sancus/src/shard"
)

// Graph is what one rank holds of the graph, as the sampler reads it.
type Graph struct {
	Rank    int
	Offsets []int64     // P+1 global row offsets: rank r owns [Offsets[r], Offsets[r+1])
	Adj     *matrix.CSR // this rank's rows of Â (self loops included), columns numbered globally
	// Orig is the original node id of every global id (nil: the global id
	// itself): it keys the draws, so a reordered graph samples alike.
	Orig     []int64
	Features *matrix.CSR // this rank's rows of X
	Labels   []int32     // this rank's rows' labels
}

// Options are how a batch is sampled and fetched.
type Options struct {
	Fanouts []int // neighbours kept per vertex, layer 1 first
	// Weights is the operator full fanout reproduces: shard.Sym (a GCN's Â,
	// self loops kept) or shard.Mean (GraphSAGE's mean over neighbours, no
	// self loop).
	Weights shard.Aggregation
	Seed    uint64
	Wire    wire.Format // how feature rows travel: fp32, bf16, int8, int4 or int2
	// Sparse sends fp32 feature rows as their nonzeros (column and value,
	// 8 bytes each) and delivers them as Batch.XSparse: fewer bytes where
	// fewer than half of a row's values are nonzero (bags of words).
	Sparse bool
}

// Block is one layer's message-flow graph: the layer computes its Dst
// vertices from its Src vertices. Dst are the first len(Dst) of Src (a
// vertex's own row feeds GraphSAGE's root term and the GCN's self loop).
type Block struct {
	Dst, Src []int64     // global ids
	SrcOrig  []int64     // Src's original ids (they key dropout masks)
	Adj      *matrix.CSR // len(Dst) × len(Src), the sampled edges' weights
}

// Batch is one rank's mini-batch: its blocks, the bottom layer's features
// and the seeds' labels.
type Batch struct {
	Blocks []Block       // layer 1 first; the last one's Dst are the seeds
	X      *matrix.Dense // features of Blocks[0].Src, as the wire delivered them (nil with Options.Sparse)
	// XSparse is the same rows as they are, with Options.Sparse.
	XSparse *matrix.CSR
	Labels  []int32 // of the seeds, in order
	Counts  Counts
}

// Counts is what sampling a batch cost one rank.
type Counts struct {
	Vertices int64 // sources over every layer's block
	Edges    int64 // sampled edges over every layer's block
	// LocalRows and RemoteRows are the feature rows this rank read from its
	// own shard and fetched from other ranks.
	LocalRows, RemoteRows int64
	BytesSent             int64 // this rank's bytes to other ranks: requests, answers, features
	FeatureBytes          int64 // of BytesSent, the feature rows'
	Seconds               float64
}

// Add adds o's counts.
func (c *Counts) Add(o Counts) {
	c.Vertices += o.Vertices
	c.Edges += o.Edges
	c.LocalRows += o.LocalRows
	c.RemoteRows += o.RemoteRows
	c.BytesSent += o.BytesSent
	c.FeatureBytes += o.FeatureBytes
	c.Seconds += o.Seconds
}

// Sampler samples the batches of one rank. Every rank of c must call
// Sample for every step, in the same order; one call at a time.
type Sampler struct {
	c    collectives.Comm
	g    Graph
	o    Options
	cand []candidate // Neighbours' scratch
}

// New checks g and o and makes rank c.Rank()'s sampler.
func New(c collectives.Comm, g Graph, o Options) (*Sampler, error) {
	p := c.Size()
	switch {
	case len(g.Offsets) != p+1:
		return nil, fmt.Errorf("sample: %d row offsets for %d ranks", len(g.Offsets), p)
	case g.Rank != c.Rank():
		return nil, fmt.Errorf("sample: rank %d was given rank %d's graph", c.Rank(), g.Rank)
	case g.Adj == nil || g.Adj.Rows != int(g.Offsets[g.Rank+1]-g.Offsets[g.Rank]):
		return nil, fmt.Errorf("sample: rank %d's adjacency does not hold its %d rows", g.Rank, g.Offsets[g.Rank+1]-g.Offsets[g.Rank])
	case g.Features == nil || g.Features.Rows != g.Adj.Rows || len(g.Labels) != g.Adj.Rows:
		return nil, fmt.Errorf("sample: rank %d's features or labels do not hold its %d rows", g.Rank, g.Adj.Rows)
	case len(o.Fanouts) == 0:
		return nil, fmt.Errorf("sample: no fanouts")
	case o.Weights != shard.Sym && o.Weights != shard.Mean:
		return nil, fmt.Errorf("sample: weights %v: Â (a GCN's) or D⁻¹A (GraphSAGE's)", o.Weights)
	case o.Wire.IsAuto() || o.Wire == wire.AsForward:
		return nil, fmt.Errorf("sample: features travel in one named width, not %v", o.Wire)
	case o.Sparse && o.Wire.Quantized():
		return nil, fmt.Errorf("sample: sparse feature rows travel in fp32, not %v", o.Wire)
	}
	for l, k := range o.Fanouts {
		if k < 1 {
			return nil, fmt.Errorf("sample: layer %d's fanout %d: at least 1", l+1, k)
		}
	}
	return &Sampler{c: c, g: g, o: o}, nil
}

// owner is the rank that owns global row v.
func (s *Sampler) owner(v int64) int {
	return sort.Search(len(s.g.Offsets)-1, func(r int) bool { return s.g.Offsets[r+1] > v })
}

// orig is v's original node id.
func (s *Sampler) orig(v int64) int64 {
	if s.g.Orig != nil {
		return s.g.Orig[v]
	}
	return v
}

// mix is SplitMix64's finalizer.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// vertexKey keys the draws of a vertex (its original id) in one layer of
// one step; a neighbour's draw is mix(vertexKey ^ its original id).
func vertexKey(seed, step uint64, layer int, orig int64) uint64 {
	return mix(mix(mix(mix(seed^0x5a3d1e)^step)^uint64(layer)) ^ uint64(orig))
}

// candidate is one neighbour of a row being sampled.
type candidate struct {
	id   int64 // global id
	val  float32
	draw uint64
	orig int64
}

// Neighbours samples global row v's neighbours in layer (0: layer 1) of
// step, v being one of this rank's rows: the kept neighbours' global ids
// and weights, and the self loop's weight (0 where Weights has none).
func (s *Sampler) Neighbours(step uint64, layer int, v int64) (ids []int64, weights []float32, self float32) {
	a, r := s.g.Adj, v-s.g.Offsets[s.g.Rank]
	cand := s.cand[:0]
	defer func() { s.cand = cand[:0] }()
	for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
		u := int64(a.ColIdx[p])
		if u == v {
			self = a.Val[p]
			continue
		}
		cand = append(cand, candidate{id: u, val: a.Val[p]})
	}
	if s.o.Weights != shard.Sym {
		self = 0
	}
	d, k := len(cand), min(len(cand), s.o.Fanouts[layer])
	if k < d {
		// The k smallest (draw, original id) in one pass, kept sorted by
		// insertion: k is a fanout, d may be a hub's thousands.
		key := vertexKey(s.o.Seed, step, layer, s.orig(v))
		less := func(x, y *candidate) bool { return x.draw < y.draw || x.draw == y.draw && x.orig < y.orig }
		n := 0
		for i := range cand {
			c := cand[i]
			c.orig = s.orig(c.id)
			c.draw = mix(key ^ uint64(c.orig))
			if n == k && !less(&c, &cand[k-1]) {
				continue
			}
			j := min(n, k-1)
			for ; j > 0 && less(&c, &cand[j-1]); j-- {
				cand[j] = cand[j-1]
			}
			cand[j] = c
			n = min(n+1, k)
		}
		cand = cand[:k]
		slices.SortFunc(cand, func(x, y candidate) int { return int(x.id - y.id) })
	}
	ids, weights = make([]int64, k), make([]float32, k)
	for i, c := range cand {
		ids[i] = c.id
		switch {
		case s.o.Weights == shard.Mean:
			weights[i] = float32(1 / float64(k))
		case k == d:
			weights[i] = c.val
		default:
			weights[i] = float32(float64(c.val) * float64(d) / float64(k))
		}
	}
	return ids, weights, self
}

// swap sends send[j] to rank j and returns what every rank sent this one
// (the counts first, then the values; this rank's own list stays here),
// with the bytes it sent to other ranks.
func (s *Sampler) swap(send [][]int64, op string) ([][]int64, int64, error) {
	p, me := s.c.Size(), s.c.Rank()
	got := make([][]int64, p)
	got[me] = send[me]
	if p == 1 {
		return got, 0, nil
	}
	start := time.Now()
	counts, in := make([]int64, p), make([]int64, p)
	ones := make([]int, p)
	for j := range p {
		ones[j] = 1
		if j != me {
			counts[j] = int64(len(send[j]))
		}
	}
	if err := collectives.Alltoallv(s.c, counts, ones, in, ones); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", op, err)
	}
	var flat []int64
	sendCounts, recvCounts := make([]int, p), make([]int, p)
	for j := range p {
		sendCounts[j], recvCounts[j] = int(counts[j]), int(in[j])
		if j != me {
			flat = append(flat, send[j]...)
		}
	}
	buf := make([]int64, sum(recvCounts))
	if err := collectives.Alltoallv(s.c, flat, sendCounts, buf, recvCounts); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", op, err)
	}
	off := 0
	for j, n := range recvCounts {
		if j != me {
			got[j] = buf[off : off+n]
			off += n
		}
	}
	sent := 8 * int64(len(flat)+p-1)
	s.c.Stats().Add(op, sent, 8*int64(len(buf)+p-1), time.Since(start))
	return got, sent, nil
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

// Sample draws step's mini-batch from this rank's seeds (distinct global
// ids of training vertices, any rank's; none is allowed): the frontier is
// expanded layer by layer from the top, then the bottom layer's features
// are fetched. Every rank must call it for every step.
func (s *Sampler) Sample(step uint64, seeds []int64) (*Batch, error) {
	start := time.Now()
	bs, err := s.blocks(step, [][]int64{seeds})
	if err != nil {
		return nil, err
	}
	b := bs[0]
	if err := s.fetch(step, b); err != nil {
		return nil, err
	}
	b.Counts.Seconds = time.Since(start).Seconds()
	return b, nil
}

// blocks samples step's blocks from each list of seeds and the seeds'
// labels, without features: one batch per list. A vertex's draw depends
// only on (step, layer, vertex), so every list's frontier is asked of its
// owners in one exchange per layer, a vertex in several frontiers once; the
// bytes are counted in the first batch.
func (s *Sampler) blocks(step uint64, seeds [][]int64) ([]*Batch, error) {
	L, p := len(s.o.Fanouts), s.c.Size()
	out := make([]*Batch, len(seeds))
	dst := make([][]int64, len(seeds))
	for k, sd := range seeds {
		out[k] = &Batch{Blocks: make([]Block, L)}
		dst[k] = slices.Clone(sd)
	}
	for l := L - 1; l >= 0; l-- {
		top := l == L-1
		req := make([][]int64, p)
		at := map[int64]int{} // a vertex's answer's offset in its owner's answers
		for _, d := range dst {
			for _, v := range d {
				if _, ok := at[v]; !ok {
					o := s.owner(v)
					at[v] = -1
					req[o] = append(req[o], v)
				}
			}
		}
		asked, sent, err := s.swap(req, "sample_ask")
		if err != nil {
			return nil, fmt.Errorf("sampling layer %d: %w", l+1, err)
		}
		out[0].Counts.BytesSent += sent
		// An answer per vertex: [label (top layer)], k, the self loop's
		// weight, then k (neighbour, weight) pairs.
		answers := make([][]int64, p)
		for j, vs := range asked {
			for _, v := range vs {
				ids, ws, self := s.Neighbours(step, l, v)
				if top {
					answers[j] = append(answers[j], int64(s.g.Labels[v-s.g.Offsets[s.g.Rank]]))
				}
				answers[j] = append(answers[j], int64(len(ids)), int64(f32bits(self)))
				for i, u := range ids {
					answers[j] = append(answers[j], u, int64(f32bits(ws[i])))
				}
			}
		}
		got, sent, err := s.swap(answers, "sample_answer")
		if err != nil {
			return nil, fmt.Errorf("sampling layer %d: %w", l+1, err)
		}
		out[0].Counts.BytesSent += sent
		for o, vs := range req {
			pos := 0
			for _, v := range vs {
				at[v] = pos
				if top {
					pos++
				}
				pos += 2 + 2*int(got[o][pos])
			}
		}
		for k, b := range out {
			d := dst[k]
			src := slices.Clone(d)
			index := make(map[int64]int32, len(d))
			for i, v := range d {
				index[v] = int32(i)
			}
			adj := &matrix.CSR{Rows: len(d), RowPtr: make([]int64, len(d)+1)}
			for i, v := range d {
				a, pos := got[s.owner(v)], at[v]
				if top {
					b.Labels = append(b.Labels, int32(a[pos]))
					pos++
				}
				n, self := int(a[pos]), f32from(a[pos+1])
				pos += 2
				if self != 0 {
					adj.ColIdx, adj.Val = append(adj.ColIdx, int32(i)), append(adj.Val, self)
				}
				for e := range n {
					u, w := a[pos+2*e], f32from(a[pos+2*e+1])
					c, ok := index[u]
					if !ok {
						c = int32(len(src))
						index[u], src = c, append(src, u)
					}
					adj.ColIdx, adj.Val = append(adj.ColIdx, c), append(adj.Val, w)
				}
				adj.RowPtr[i+1] = int64(len(adj.ColIdx))
			}
			adj.Cols = len(src)
			orig := make([]int64, len(src))
			for i, v := range src {
				orig[i] = s.orig(v)
			}
			b.Blocks[l] = Block{Dst: d, Src: src, SrcOrig: orig, Adj: adj}
			b.Counts.Vertices += int64(len(src))
			b.Counts.Edges += adj.NNZ()
			dst[k] = src
		}
	}
	return out, nil
}

// fetch fills b.X with the features of the bottom layer's sources: each
// owner sends its rows in the wire's format, rounded keyed by (seed, step,
// original id); a rank's own rows go through the same rounding, so a
// vertex's features do not depend on which rank reads them. fp32 rows
// travel as they are.
func (s *Sampler) fetch(step uint64, b *Batch) error {
	if s.o.Sparse {
		return s.fetchSparse(b)
	}
	rows := b.Blocks[0].Src
	p, me := s.c.Size(), s.c.Rank()
	width, bits := s.g.Features.Cols, s.o.Wire.Or(wire.FP32).Bits()
	rb := wire.RowBytes(bits, width)
	stream := mix(s.o.Seed^0xfea7) ^ step
	req, at, asked, err := s.askOwners(b, rows)
	if err != nil {
		return err
	}
	// rowOf writes this rank's row v of X into dst (width values).
	f := s.g.Features
	rowOf := func(dst []float32, v int64) {
		clear(dst)
		r := v - s.g.Offsets[me]
		for q := f.RowPtr[r]; q < f.RowPtr[r+1]; q++ {
			dst[f.ColIdx[q]] = f.Val[q]
		}
	}
	// encode writes this rank's rows vs into dst, row after row, in the
	// wire's format.
	buf := make([]float32, width)
	encode := func(dst []byte, vs []int64) {
		for i, v := range vs {
			if bits == wire.FP32 {
				rowOf(unsafe.Slice((*float32)(unsafe.Pointer(&dst[i*rb])), width), v)
				continue
			}
			rowOf(buf, v)
			seed := wire.Seed(stream, uint64(s.orig(v)))
			wire.Encode(dst[i*rb:(i+1)*rb], buf, width, bits, func(int) uint64 { return seed })
		}
	}
	x := matrix.NewDense(len(rows), width)
	place := func(src []byte, j int) {
		for k, i := range at[j] {
			if bits == wire.FP32 {
				copy(x.Row(i), unsafe.Slice((*float32)(unsafe.Pointer(&src[k*rb])), width))
				continue
			}
			wire.Decode(x.Row(i), src[k*rb:(k+1)*rb], width, bits, false)
		}
	}
	for k, i := range at[me] {
		if bits == wire.FP32 {
			rowOf(x.Row(i), req[me][k])
			continue
		}
		one := make([]byte, rb)
		encode(one, req[me][k:k+1])
		wire.Decode(x.Row(i), one, width, bits, false)
	}
	if p > 1 {
		start := time.Now()
		sendCounts, recvCounts := make([]int, p), make([]int, p)
		n := 0
		for j, vs := range asked {
			if j != me {
				sendCounts[j], recvCounts[j] = len(vs)*rb, len(req[j])*rb
				n += sendCounts[j]
			}
		}
		// float32-aligned buffers: fp32 rows are written and read in place.
		out := collectives.Bytes(make([]float32, (n+3)/4))[:n]
		off := 0
		for j, vs := range asked {
			if j != me {
				encode(out[off:off+sendCounts[j]], vs)
				off += sendCounts[j]
			}
		}
		in := collectives.Bytes(make([]float32, (sum(recvCounts)+3)/4))[:sum(recvCounts)]
		if err := s.c.Alltoallv(out, sendCounts, in, recvCounts); err != nil {
			return fmt.Errorf("fetching features: %w", err)
		}
		s.c.Stats().Add("fetch_rows", int64(len(out)), int64(len(in)), time.Since(start))
		b.Counts.BytesSent += int64(len(out))
		b.Counts.FeatureBytes += int64(len(out))
		off = 0
		for j, n := range recvCounts {
			if j != me {
				place(in[off:off+n], j)
				off += n
			}
		}
	}
	b.X = x
	return nil
}

// askOwners sends each owner the rows of it that this batch reads: req
// are those rows by owner, at their positions in rows, asked the rows each
// rank asks of this one. It counts the request bytes and the rows read
// locally and fetched.
func (s *Sampler) askOwners(b *Batch, rows []int64) (req [][]int64, at [][]int, asked [][]int64, err error) {
	p, me := s.c.Size(), s.c.Rank()
	req, at = make([][]int64, p), make([][]int, p)
	for i, v := range rows {
		o := s.owner(v)
		req[o], at[o] = append(req[o], v), append(at[o], i)
	}
	asked, sent, err := s.swap(req, "fetch_ask")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("fetching features: %w", err)
	}
	b.Counts.BytesSent += sent
	b.Counts.LocalRows, b.Counts.RemoteRows = int64(len(req[me])), int64(len(rows)-len(req[me]))
	return req, at, asked, nil
}

// fetchSparse fills b.XSparse with the features of the bottom layer's
// sources, each owner sending a row as its count and its nonzeros (column
// and value bits packed in one int64).
func (s *Sampler) fetchSparse(b *Batch) error {
	rows := b.Blocks[0].Src
	p, me := s.c.Size(), s.c.Rank()
	_, _, asked, err := s.askOwners(b, rows)
	if err != nil {
		return err
	}
	f := s.g.Features
	answers := make([][]int64, p)
	for j, vs := range asked {
		n := len(vs)
		for _, v := range vs {
			r := v - s.g.Offsets[me]
			n += int(f.RowPtr[r+1] - f.RowPtr[r])
		}
		a := make([]int64, 0, n)
		for _, v := range vs {
			r := v - s.g.Offsets[me]
			a = append(a, f.RowPtr[r+1]-f.RowPtr[r])
			for q := f.RowPtr[r]; q < f.RowPtr[r+1]; q++ {
				a = append(a, int64(uint64(f.ColIdx[q])<<32|uint64(f32bits(f.Val[q]))))
			}
		}
		answers[j] = a
	}
	got, sent, err := s.swap(answers, "fetch_rows")
	if err != nil {
		return fmt.Errorf("fetching features: %w", err)
	}
	b.Counts.BytesSent += sent
	b.Counts.FeatureBytes += sent
	nnz := -len(rows)
	for _, a := range got {
		nnz += len(a)
	}
	x := &matrix.CSR{Rows: len(rows), Cols: f.Cols, RowPtr: make([]int64, len(rows)+1), ColIdx: make([]int32, 0, nnz), Val: make([]float32, 0, nnz)}
	pos := make([]int, p)
	for i, v := range rows {
		o := s.owner(v)
		a, at := got[o], pos[o]
		n := int(a[at])
		for _, w := range a[at+1 : at+1+n] {
			x.ColIdx, x.Val = append(x.ColIdx, int32(uint64(w)>>32)), append(x.Val, math.Float32frombits(uint32(w)))
		}
		pos[o] = at + 1 + n
		x.RowPtr[i+1] = int64(len(x.ColIdx))
	}
	b.XSparse = x
	return nil
}

func f32bits(v float32) uint32 { return math.Float32bits(v) }
func f32from(v int64) float32  { return math.Float32frombits(uint32(v)) }

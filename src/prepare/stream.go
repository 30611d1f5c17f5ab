package prepare

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"

	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/shard"
)

// Streaming writes the shards of a dataset directory without ever
// holding its edge list: the graph file is streamed once for degrees (when
// the rows are cut by nonzeros) and once more into one temporary bucket
// file per part; each part's edges are then loaded, deduplicated and
// normalized on their own. Memory is O(|V| + nnz(X) + the largest part's
// edges). The shards equal those of InMemory bit for bit.
//
// assign gives each node's part (nil: contiguous ranges balanced by
// nonzeros, from a streaming degree pass).
func Streaming(dataDir, outDir string, parts int, opt Options, load graph.LoadOptions) (*Prepared, error) {
	assign := opt.Parts
	s, err := graph.OpenEdgeStream(dataDir)
	if err != nil {
		return nil, err
	}
	nodes := opt.Nodes
	if nodes == nil {
		if nodes, err = graph.LoadNodeData(dataDir, s.N, load); err != nil {
			return nil, err
		}
	}
	n := nodes.N
	if parts < 1 || parts > n {
		return nil, fmt.Errorf("cannot split %d rows into %d parts", n, parts)
	}
	tmp, err := os.MkdirTemp(outDir, ".prepare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	// Node order and row ranges.
	var perm []int32
	var off []int64
	var edges int64 // counted by the degree pass, for the next pass's estimate
	if assign != nil {
		if len(assign) != n {
			return nil, fmt.Errorf("dataset %s: partition covers %d nodes, graph has %d", nodes.Name, len(assign), n)
		}
		perm, off = orderByPart(assign, parts)
	} else {
		if off, edges, err = streamingRanges(s, n, parts, opt); err != nil {
			return nil, err
		}
	}
	inv := make([]int32, n) // old id -> new id
	for i := range inv {
		inv[i] = int32(i)
	}
	if perm != nil {
		for i, v := range perm {
			inv[v] = int32(i)
		}
	}
	part := func(newID int32) int {
		q, _ := slices.BinarySearch(off, int64(newID)+1)
		return q - 1
	}

	// Bucket both directions of every edge by the part owning its row.
	buckets := make([]*bufio.Writer, parts)
	files := make([]*os.File, parts)
	for q := range buckets {
		if files[q], err = os.Create(filepath.Join(tmp, fmt.Sprintf("edges-%05d", q))); err != nil {
			return nil, err
		}
		buckets[q] = bufio.NewWriterSize(files[q], 1<<16)
	}
	var pair [8]byte
	put := func(r, c int32) error {
		binary.LittleEndian.PutUint32(pair[:4], uint32(r))
		binary.LittleEndian.PutUint32(pair[4:], uint32(c))
		_, err := buckets[part(r)].Write(pair[:])
		return err
	}
	var seen int64
	err = s.Each(func(u, v int32) error {
		if seen++; seen%(1<<16) == 0 {
			opt.report("bucketing edges by part", "edges", seen, edges)
		}
		if int(u) >= n || int(v) >= n {
			return fmt.Errorf("edge (%d,%d) outside %d nodes", u, v, n)
		}
		if u == v {
			return nil
		}
		if err := put(inv[u], inv[v]); err != nil {
			return err
		}
		return put(inv[v], inv[u])
	})
	for q := range buckets {
		if ferr := buckets[q].Flush(); err == nil {
			err = ferr
		}
		if cerr := files[q].Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucketing edges of %s: %w", s.Path, err)
	}

	// Each part: its rows deduplicated; all degrees before any value.
	deg := make([]int64, n)
	rowsOf := func(q int) (*matrix.CSR, error) {
		return loadBucket(filepath.Join(tmp, fmt.Sprintf("edges-%05d", q)), off[q], off[q+1], n)
	}
	for q := 0; q < parts; q++ {
		a, err := rowsOf(q)
		if err != nil {
			return nil, err
		}
		for r := 0; r < a.Rows; r++ {
			deg[off[q]+int64(r)] = a.RowPtr[r+1] - a.RowPtr[r]
		}
		releasePart()
	}
	dinv := make([]float64, n)
	for i, d := range deg {
		dinv[i] = 1 / math.Sqrt(float64(d+1))
	}
	ds := nodes
	if perm != nil {
		ds = Reorder(&graph.Dataset{Name: nodes.Name, N: n, Classes: nodes.Classes, Adj: emptyCSR(n), Features: nodes.Features,
			Labels: nodes.Labels, Multi: nodes.Multi, Train: nodes.Train, Val: nodes.Val, Test: nodes.Test}, perm)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	prep := &Prepared{DS: ds, Offsets: off, IDs: perm, Set: opt.identity(ds, off, perm)}
	for q := 0; q < parts; q++ {
		a, err := rowsOf(q)
		if err != nil {
			return nil, err
		}
		sh, err := splitRows(ds, graph.NormalizeRows(a, off[q], dinv), off, perm, q, opt)
		if err != nil {
			return nil, err
		}
		var blockBytes int64
		for _, b := range sh.Blocks {
			blockBytes += b.Bytes()
			prep.nnz += b.NNZ()
		}
		prep.compulsory = max(prep.compulsory, blockBytes+ds.Features.Bytes()+sh.AX.CSR.Bytes()+sh.MX.CSR.Bytes())
		opt.attachClusters(sh, perm)
		sh.Set = prep.Set
		if err := sh.Write(outDir); err != nil {
			return nil, err
		}
		opt.report("writing parts", "parts", int64(q+1), int64(parts))
		if opt.OnShard != nil {
			opt.OnShard(sh)
		}
		releasePart()
	}
	return prep, nil
}

// releasePart returns a finished part's arrays to the system before the
// next part allocates its own: the collector would otherwise keep them as
// free heap beside the next part's (a part's arrays are the peak).
func releasePart() { debug.FreeOSMemory() }

// streamingRanges cuts [0, n) into parts ranges of about equal nonzeros of Â
// from one pass of degrees (duplicate edges in the file count twice here,
// which only nudges the balance).
func streamingRanges(s *graph.EdgeStream, n, parts int, opt Options) ([]int64, int64, error) {
	deg := make([]int64, n+1)
	var edges int64
	if err := s.Each(func(u, v int32) error {
		if edges++; edges%(1<<16) == 0 {
			opt.report("counting degrees", "edges", edges, 0)
		}
		if int(u) >= n || int(v) >= n {
			return fmt.Errorf("edge (%d,%d) outside %d nodes", u, v, n)
		}
		if u != v {
			deg[u+1]++
			deg[v+1]++
		}
		return nil
	}); err != nil {
		return nil, 0, fmt.Errorf("degree pass over %s: %w", s.Path, err)
	}
	for i := 0; i < n; i++ {
		deg[i+1] += deg[i] + 1 // the self loop
	}
	a := &matrix.CSR{Rows: n, RowPtr: deg}
	off, err := BalancedRanges(a, parts)
	return off, edges, err
}

func emptyCSR(n int) *matrix.CSR {
	return &matrix.CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1)}
}

// loadBucket reads one part's (row, column) pairs into CSR rows [lo, hi)
// with sorted, unique columns.
func loadBucket(path string, lo, hi int64, n int) (*matrix.CSR, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m := st.Size() / 8
	rows := int(hi - lo)
	src := make([]int32, 0, m)
	dst := make([]int32, 0, m)
	r := bufio.NewReaderSize(f, 1<<16)
	var pair [8]byte
	for {
		if _, err := io.ReadFull(r, pair[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		src = append(src, int32(binary.LittleEndian.Uint32(pair[:4]))-int32(lo))
		dst = append(dst, int32(binary.LittleEndian.Uint32(pair[4:])))
	}
	a := &matrix.CSR{Rows: rows, Cols: n, RowPtr: make([]int64, rows+1)}
	for _, s := range src {
		a.RowPtr[s+1]++
	}
	for i := 0; i < rows; i++ {
		a.RowPtr[i+1] += a.RowPtr[i]
	}
	col := make([]int32, len(src))
	next := append([]int64(nil), a.RowPtr[:rows]...)
	for k, s := range src {
		col[next[s]] = dst[k]
		next[s]++
	}
	w := int64(0)
	out := make([]int64, rows+1)
	for i := 0; i < rows; i++ {
		row := col[a.RowPtr[i]:a.RowPtr[i+1]]
		slices.Sort(row)
		row = slices.Compact(row)
		copy(col[w:], row)
		w += int64(len(row))
		out[i+1] = w
	}
	a.RowPtr, a.ColIdx = out, col[:w:w]
	return a, nil
}

// splitRows builds rank q's shard from its rows of Â (columns global). The
// rows are cut into the shard's column blocks first and the products are
// formed from the blocks, so the rows can go before the products are
// allocated: prepare never holds Â's rows twice beside them.
func splitRows(ds *graph.Dataset, ahatRows *matrix.CSR, off []int64, ids []int32, q int, opt Options) (*shard.Shard, error) {
	blocks := columnBlocks(ahatRows, off) // ahatRows is not read after this
	releasePart()
	products, err := opt.products(blocks, off, q, ds.Features)
	if err != nil {
		return nil, err
	}
	return newShard(ds, blocks, products, off, ids, q), nil
}

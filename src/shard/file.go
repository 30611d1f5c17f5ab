package shard

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"path/filepath"
	"slices"

	"sancus/kernels/matrix"
	"sancus/src/atomicfile"
	"sancus/src/budget"
)

// File layout (little endian):
//
//	magic "SANCUSSH" | version u32 | body length u64 | body | CRC-32C u32
//
// The checksum covers header and body (format 3; format 2 covered the body
// only), so a flipped byte anywhere reads as corruption, never as another
// version.
//
// body: rank, parts, n, classes, featdim, globalTrain (u64 each), offsets
// (parts+1 × u64), P column blocks, features, ÂX, then D⁻¹AX (since
// format 8; each flag 0: none, 1: CSR, 2: dense rows, cols and values,
// since format 6, when denser than matrix.DenseThreshold: half the bytes,
// read straight into the matrix the engine multiplies), labels, train,
// val, test, original node ids (length-prefixed i32 arrays; no ids = the
// original order), multi-label targets (flag + CSR, since format 4),
// cluster count and each row's cluster (since format 5), the identity of
// the shard set (u64, since format 7: Shard.Set). A CSR
// is rows, cols, nnz, then rowptr (i64), colidx (i32), values (f32).
const (
	magic   = "SANCUSSH"
	Version = 8
	// maxParts bounds a part count read from a file.
	maxParts = 1 << 20
)

// FileName is the name of rank r's shard out of parts.
func FileName(r, parts int) string { return fmt.Sprintf("shard-%05d-of-%05d.bin", r, parts) }

type enc struct {
	w   *bufio.Writer
	buf [8]byte
	n   int64
	err error
}

func (e *enc) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.write(e.buf[:8])
}
func (e *enc) write(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
		e.n += int64(len(b))
	}
}
func (e *enc) i32s(xs []int32) {
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		binary.LittleEndian.PutUint32(e.buf[:], uint32(x))
		e.write(e.buf[:4])
	}
}
func (e *enc) f32s(xs []float32) {
	for _, x := range xs {
		binary.LittleEndian.PutUint32(e.buf[:], math.Float32bits(x))
		e.write(e.buf[:4])
	}
}
func (e *enc) csr(a *matrix.CSR) {
	e.u64(uint64(a.Rows))
	e.u64(uint64(a.Cols))
	e.u64(uint64(a.NNZ()))
	for _, p := range a.RowPtr {
		e.u64(uint64(p))
	}
	for _, c := range a.ColIdx {
		binary.LittleEndian.PutUint32(e.buf[:], uint32(c))
		e.write(e.buf[:4])
	}
	e.f32s(a.Val)
}

// dense writes rows × cols values, row r filled by fill.
func (e *enc) dense(rows, cols int, fill func(r int, row []float32)) {
	e.u64(uint64(rows))
	e.u64(uint64(cols))
	row := make([]float32, cols)
	for r := range rows {
		fill(r, row)
		e.f32s(row)
	}
}

// aggregate writes a precomputed product: dense rows where it is dense
// enough, else CSR.
func (e *enc) aggregate(a Aggregate) {
	switch m := a.CSR; {
	case a.Dense != nil:
		e.u64(2)
		e.dense(a.Dense.Rows, a.Dense.Cols, func(r int, row []float32) { copy(row, a.Dense.Row(r)) })
	case m != nil && m.DenseEnough():
		e.u64(2)
		e.dense(m.Rows, m.Cols, func(r int, row []float32) {
			clear(row)
			for p := m.RowPtr[r]; p < m.RowPtr[r+1]; p++ {
				row[m.ColIdx[p]] = m.Val[p]
			}
		})
	case m != nil:
		e.u64(1)
		e.csr(m)
	default:
		e.u64(0)
	}
}

func (s *Shard) encode(w io.Writer) (int64, error) {
	e := &enc{w: bufio.NewWriterSize(w, 1<<20)}
	for _, v := range []int{s.Rank, s.Parts, s.N, s.Classes, s.FeatDim, s.GlobalTrain} {
		e.u64(uint64(v))
	}
	for _, o := range s.Offsets {
		e.u64(uint64(o))
	}
	for _, b := range s.Blocks {
		e.csr(b)
	}
	e.csr(s.Features)
	e.aggregate(s.AX)
	e.aggregate(s.MX)
	e.i32s(s.Labels)
	e.i32s(s.Train)
	e.i32s(s.Val)
	e.i32s(s.Test)
	e.i32s(s.NodeIDs)
	if s.Multi != nil {
		e.u64(1)
		e.csr(s.Multi)
	} else {
		e.u64(0)
	}
	e.u64(uint64(s.NumClusters))
	e.i32s(s.Clusters)
	e.u64(s.Set)
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.n, e.err
}

// Write stores the shard as dir/FileName(rank, parts), through a temporary
// file and a rename: a full disk or a crash leaves the old file or none,
// never a truncated one.
func (s *Shard) Write(dir string) error {
	path := filepath.Join(dir, FileName(s.Rank, s.Parts))
	// Size the body first so the header can carry its length.
	n, err := s.encode(io.Discard)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, func(f io.Writer) error {
		var hdr [20]byte
		copy(hdr[:8], magic)
		binary.LittleEndian.PutUint32(hdr[8:], Version)
		binary.LittleEndian.PutUint64(hdr[12:], uint64(n))
		if _, err := f.Write(hdr[:]); err != nil {
			return err
		}
		h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
		h.Write(hdr[:])
		if _, err := s.encode(io.MultiWriter(f, h)); err != nil {
			return err
		}
		var sum [4]byte
		binary.LittleEndian.PutUint32(sum[:], h.Sum32())
		_, err := f.Write(sum[:])
		return err
	})
}

// dec decodes a body as it streams from the file, straight into the
// arrays the shard keeps: the file is never held in memory beside them.
// Every byte read goes through the checksums.
type dec struct {
	r         io.Reader
	left      int64 // body bytes not read yet
	err       error
	buf       []byte
	all, body hash.Hash32 // CRC-32C of header + body, and of the body alone (format 2)
}

var errShort = errors.New("truncated body")

// read fills the next k bytes of the body into d.buf.
func (d *dec) read(k int) []byte {
	if d.err != nil {
		return nil
	}
	if int64(k) > d.left {
		d.err = errShort
		return nil
	}
	if cap(d.buf) < k {
		d.buf = make([]byte, max(k, 1<<16))
	}
	b := d.buf[:k]
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.err = err
		return nil
	}
	d.left -= int64(k)
	d.all.Write(b)
	d.body.Write(b)
	return b
}

func (d *dec) u64() uint64 {
	if b := d.read(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// count reads a length and checks it against what is left, so a corrupt
// length cannot make us allocate terabytes.
func (d *dec) count(elem int) int {
	v := d.u64()
	if d.err == nil && v > uint64(d.left)/uint64(elem) {
		d.err = fmt.Errorf("length %d exceeds the file", v)
		return 0
	}
	return int(v)
}

// words decodes n 32-bit words, 64 KiB at a time, through put.
func (d *dec) words(n int, put func(i int, w uint32)) {
	for i := 0; i < n && d.err == nil; {
		k := min(n-i, 1<<14)
		b := d.read(4 * k)
		for j := 0; j < k && b != nil; j++ {
			put(i+j, binary.LittleEndian.Uint32(b[4*j:]))
		}
		i += k
	}
}

func (d *dec) i32s(n int) []int32 {
	if n == 0 || d.err != nil {
		return nil
	}
	if int64(n)*4 > d.left {
		d.err = errShort
		return nil
	}
	out := matrix.Make[int32](n)
	d.words(n, func(i int, w uint32) { out[i] = int32(w) })
	return out
}

func (d *dec) f32s(n int) []float32 {
	if d.err != nil || int64(n)*4 > d.left {
		d.err = cmp.Or(d.err, errShort)
		return nil
	}
	out := matrix.Make[float32](n)
	d.words(n, func(i int, w uint32) { out[i] = math.Float32frombits(w) })
	return out
}

func (d *dec) csr() *matrix.CSR {
	rows, cols := d.count(8), int(d.u64())
	nnz := d.count(8)
	if d.err != nil {
		return nil
	}
	a := &matrix.CSR{Rows: rows, Cols: cols, RowPtr: matrix.Make[int64](rows + 1)}
	for i := range a.RowPtr {
		a.RowPtr[i] = int64(d.u64())
	}
	a.ColIdx = d.i32s(nnz)
	a.Val = d.f32s(nnz)
	if d.err == nil {
		if err := a.Validate(); err != nil {
			d.err = err
		}
	}
	return a
}

// Read loads dir/FileName(rank, parts) and checks magic, version, checksum,
// and that it really is rank's shard of a parts-way split. The directory
// is checked whole first (OpenDir). The body is decoded as it is read; a
// checksum mismatch found at the end discards what was decoded.
func Read(dir string, rank, parts int) (*Shard, error) {
	meta, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName(rank, parts))
	if meta.Parts != parts {
		return nil, fmt.Errorf("shard %s: not found; %s holds shards for another rank count (%d, %s): run sancus prepare --parts %d or launch with %d ranks",
			path, dir, meta.Parts, FileName(0, meta.Parts), parts, meta.Parts)
	}
	f, err := atomicfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", path, err)
	}
	if err := budget.Check("shard "+path, fmt.Sprintf("a shard of %d bytes", st.Size()), st.Size()); err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("shard %s: %s", path, fmt.Sprintf(format, args...))
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [20]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || string(hdr[:8]) != magic {
		return nil, bad("not a sancus shard (bad magic)")
	}
	n := binary.LittleEndian.Uint64(hdr[12:])
	if size := st.Size(); size < 24 || uint64(size-24) != n {
		return nil, bad("%d bytes, header promises %d (truncated, or a corrupt header)", size, n+24)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	d := &dec{r: r, left: int64(n), all: crc32.New(table), body: crc32.New(table)}
	d.all.Write(hdr[:])
	v := binary.LittleEndian.Uint32(hdr[8:])
	var s *Shard
	if v == Version {
		s = d.shard()
	}
	// Whatever was decoded, the checksum over every byte decides first.
	decodeErr := d.err
	d.err = nil
	for d.err == nil && d.left > 0 {
		d.read(int(min(d.left, 1<<20)))
	}
	if d.err != nil {
		return nil, bad("reading: %v", d.err)
	}
	var sum [4]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return nil, bad("reading the checksum: %v", err)
	}
	stored := binary.LittleEndian.Uint32(sum[:])
	if got := d.all.Sum32(); got != stored {
		if v == 2 && d.body.Sum32() == stored {
			return nil, bad("format version 2, written by an older sancus: run sancus prepare again")
		}
		return nil, bad("checksum mismatch (stored %08x, computed %08x): the file is corrupt", stored, got)
	}
	if v != Version {
		if v < Version {
			return nil, bad("format version %d, written by an older sancus: run sancus prepare again", v)
		}
		return nil, bad("format version %d, this sancus reads %d", v, Version)
	}
	if decodeErr != nil {
		return nil, bad("%v", decodeErr)
	}
	if s.Parts != parts || s.Rank != rank {
		return nil, bad("holds rank %d of %d, wanted rank %d of %d", s.Rank, s.Parts, rank, parts)
	}
	if s.N != meta.Nodes || !slices.Equal(s.Offsets, meta.Offsets) {
		return nil, bad("rows of a %d-node graph split at %s, but %s says %d nodes split at %s: a file of another prepare; run sancus prepare again",
			s.N, clipOffsets(s.Offsets), MetaFile, meta.Nodes, clipOffsets(meta.Offsets))
	}
	if err := s.check(); err != nil {
		return nil, bad("%v", err)
	}
	return s, nil
}

// aggregate reads a precomputed product as enc.aggregate wrote it.
func (d *dec) aggregate(g Aggregation) Aggregate {
	switch d.u64() {
	case 1:
		return Aggregate{CSR: d.csr()}
	case 2:
		rows, cols := d.count(1), d.count(1)
		if d.err == nil && cols > 0 && rows > int(d.left/4)/cols {
			d.err = fmt.Errorf("dense %v of %d×%d exceeds the file", g, rows, cols)
		}
		if d.err == nil {
			return Aggregate{Dense: &matrix.Dense{Rows: rows, Cols: cols, Data: d.f32s(rows * cols)}}
		}
	}
	return Aggregate{}
}

// shard decodes a body of the current version.
func (d *dec) shard() *Shard {
	s := &Shard{}
	s.Rank, s.Parts, s.N = int(d.u64()), int(d.u64()), int(d.u64())
	s.Classes, s.FeatDim, s.GlobalTrain = int(d.u64()), int(d.u64()), int(d.u64())
	if d.err != nil {
		return s
	}
	// The part count sizes the offsets and blocks below, not the file's
	// length: nothing is sized from a header that did not read whole.
	if s.Parts < 1 || s.Parts > maxParts {
		d.err = fmt.Errorf("implausible part count %d", s.Parts)
		return s
	}
	s.Offsets = make([]int64, s.Parts+1)
	for i := range s.Offsets {
		s.Offsets[i] = int64(d.u64())
	}
	s.Blocks = make([]*matrix.CSR, s.Parts)
	for j := range s.Blocks {
		s.Blocks[j] = d.csr()
	}
	s.Features = d.csr()
	s.AX, s.MX = d.aggregate(Sym), d.aggregate(Mean)
	s.Labels = d.i32s(d.count(4))
	s.Train = d.i32s(d.count(4))
	s.Val = d.i32s(d.count(4))
	s.Test = d.i32s(d.count(4))
	s.NodeIDs = d.i32s(d.count(4))
	if d.u64() == 1 {
		s.Multi = d.csr()
	}
	s.NumClusters = int(d.u64())
	if s.Clusters = d.i32s(d.count(4)); len(s.Clusters) == 0 {
		s.Clusters = nil
	}
	s.Set = d.u64()
	return s
}

// check verifies that the parts of a shard agree with each other.
func (s *Shard) check() error {
	rows := s.Rows()
	for j, b := range s.Blocks {
		if b.Rows != rows || b.Cols != s.RowsOf(j) {
			return fmt.Errorf("block %d is %dx%d, want %dx%d", j, b.Rows, b.Cols, rows, s.RowsOf(j))
		}
	}
	if s.Features.Rows != rows || s.Features.Cols != s.FeatDim {
		return fmt.Errorf("features are %dx%d, want %dx%d", s.Features.Rows, s.Features.Cols, rows, s.FeatDim)
	}
	for _, g := range []Aggregation{Sym, Mean} {
		a := s.Of(g)
		if m := a.CSR; m != nil && (m.Rows != rows || m.Cols != s.FeatDim) {
			return fmt.Errorf("%v is %dx%d, want %dx%d", g, m.Rows, m.Cols, rows, s.FeatDim)
		}
		if m := a.Dense; m != nil && (m.Rows != rows || m.Cols != s.FeatDim) {
			return fmt.Errorf("%v is %dx%d, want %dx%d", g, m.Rows, m.Cols, rows, s.FeatDim)
		}
	}
	if len(s.Labels) != rows {
		return fmt.Errorf("%d labels for %d rows", len(s.Labels), rows)
	}
	if s.NodeIDs != nil && len(s.NodeIDs) != rows {
		return fmt.Errorf("%d node ids for %d rows", len(s.NodeIDs), rows)
	}
	if s.Clusters != nil && len(s.Clusters) != rows {
		return fmt.Errorf("%d cluster ids for %d rows", len(s.Clusters), rows)
	}
	for _, c := range s.Clusters {
		if c < 0 || int(c) >= s.NumClusters {
			return fmt.Errorf("cluster %d outside 0..%d", c, s.NumClusters-1)
		}
	}
	for _, set := range [][]int32{s.Train, s.Val, s.Test} {
		for _, v := range set {
			if v < 0 || int(v) >= rows {
				return fmt.Errorf("split node %d outside 0..%d", v, rows-1)
			}
		}
	}
	return nil
}

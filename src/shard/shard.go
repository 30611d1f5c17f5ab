// Package shard is the unit of data a rank owns: its block row of Â (as P
// column blocks), its features, the precomputed ÂX and D⁻¹AX rows, labels and split
// masks. `sancus prepare` (src/prepare) writes one shard file per rank; a
// rank of a distributed run reads only its own. Nothing else reaches a rank.
package shard

import "sancus/kernels/matrix"

// Shard is rank Rank's block row of a graph split into Parts contiguous
// row ranges.
type Shard struct {
	Rank, Parts int
	N           int     // global node count
	Offsets     []int64 // Parts+1 global row offsets; rank r owns [Offsets[r], Offsets[r+1])
	Classes     int
	FeatDim     int
	GlobalTrain int // training nodes over all ranks (the loss normalizer)

	Blocks      []*matrix.CSR // Blocks[j] = Â_ij, rows × rows of rank j, local column ids
	Features    *matrix.CSR   // X_i
	AX          Aggregate     // (ÂX)_i, precomputed once (a GCN's layer 1); empty if not prepared
	MX          Aggregate     // (D⁻¹AX)_i, the neighbours' mean of X (a GraphSAGE's layer 1)
	Labels      []int32       // local rows; -1 unlabeled
	Multi       *matrix.CSR   // multi-label targets of the local rows (nil: single-label)
	NodeIDs     []int32       // original node id of each local row (nil: rows are in the original order)
	Clusters    []int32       // cluster of each local row, for cluster-batch training (nil: none prepared)
	NumClusters int           // clusters over all ranks
	// Set identifies the preparation that made this shard: every shard of
	// one `prepare` carries the same value, a hash of the data it read
	// (prepare.Options.Source), its sizes, the split, the partition and the
	// preprocessing. Ranks refuse to train on shards of two sets.
	Set   uint64
	Train []int32 // local row ids
	Val   []int32
	Test  []int32
}

// Aggregation names a normalized adjacency whose product with the
// constant X a shard can hold, so that layer 1 multiplies it instead of
// aggregating X over the network every epoch.
type Aggregation uint8

const (
	Sym  Aggregation = 1 << iota // Â = D̃^-½(A+I)D̃^-½, a GCN's
	Mean                         // M = D⁻¹A without self loops, GraphSAGE-mean's
	// Aggregations is every kind: what prepare --precompute stores.
	Aggregations = Sym | Mean
)

func (g Aggregation) String() string {
	switch g {
	case Sym:
		return "ÂX"
	case Mean:
		return "D⁻¹AX"
	case 0:
		return "none"
	}
	return "ÂX and D⁻¹AX"
}

// Aggregate is a precomputed product, as CSR, or as dense rows where a
// shard file stored it dense (then CSR is nil).
type Aggregate struct {
	CSR   *matrix.CSR
	Dense *matrix.Dense
}

// Held reports whether the product is there.
func (a Aggregate) Held() bool { return a.CSR != nil || a.Dense != nil }

// Of is the shard's product with X of one aggregation.
func (s *Shard) Of(g Aggregation) *Aggregate {
	if g == Mean {
		return &s.MX
	}
	return &s.AX
}

// Holds reports whether the shard holds every product g names.
func (s *Shard) Holds(g Aggregation) bool {
	return (g&Sym == 0 || s.AX.Held()) && (g&Mean == 0 || s.MX.Held())
}

// Rows is the number of rows this rank owns.
func (s *Shard) Rows() int { return int(s.Offsets[s.Rank+1] - s.Offsets[s.Rank]) }

// RowsOf is the number of rows rank j owns.
func (s *Shard) RowsOf(j int) int { return int(s.Offsets[j+1] - s.Offsets[j]) }

// Row0 is the global id of local row 0.
func (s *Shard) Row0() int { return int(s.Offsets[s.Rank]) }

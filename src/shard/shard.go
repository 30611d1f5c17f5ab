// Package shard is the unit of data a rank owns: its block row of Â (as P
// column blocks), its features, the precomputed (ÂX) rows, labels and split
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
	AX          *matrix.CSR   // (ÂX)_i, precomputed once; nil if not prepared (or if read dense)
	AXDense     *matrix.Dense // (ÂX)_i as a shard file stores it when dense enough (then AX is nil)
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

// HasAX reports whether the shard holds the precomputed ÂX.
func (s *Shard) HasAX() bool { return s.AX != nil || s.AXDense != nil }

// Rows is the number of rows this rank owns.
func (s *Shard) Rows() int { return int(s.Offsets[s.Rank+1] - s.Offsets[s.Rank]) }

// RowsOf is the number of rows rank j owns.
func (s *Shard) RowsOf(j int) int { return int(s.Offsets[j+1] - s.Offsets[j]) }

// Row0 is the global id of local row 0.
func (s *Shard) Row0() int { return int(s.Offsets[s.Rank]) }

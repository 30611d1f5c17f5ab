// Package scaling says what a cluster will do before a job is submitted:
// for a graph, a model and P ranks it counts, exactly, from the partition,
// the rows, nonzeros, bytes and messages of every rank's training epoch
// (the sparse exchange's rule, train.Config.Flows), and predicts the
// epoch's time from a cluster's link and compute rates (model.go).
package scaling

import (
	"fmt"

	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/prepare"
	"sancus/src/train"
)

// Graph is what counting reads of a dataset: its symmetric adjacency
// without self loops and its training nodes.
type Graph struct {
	Adj   *matrix.CSR
	Train []bool // by node id
}

// Partition assigns every node a rank.
type Partition struct {
	P     int
	Parts []int32 // Parts[v]: v's rank
}

// Contiguous is the default preparation's partition: the node order cut
// into P ranges of about equal nonzeros of Â plus rows
// (prepare.BalancedRanges).
func Contiguous(g Graph, p int) (Partition, error) {
	n := g.Adj.Rows
	ptr := make([]int64, n+1) // Â's row pointers: A's, plus a self loop a row
	for r := range ptr {
		ptr[r] = g.Adj.RowPtr[r] + int64(r)
	}
	off, err := prepare.BalancedRanges(&matrix.CSR{Rows: n, Cols: n, RowPtr: ptr}, p)
	if err != nil {
		return Partition{}, err
	}
	return FromOffsets(off), nil
}

// FromOffsets is the partition of contiguous row ranges.
func FromOffsets(off []int64) Partition {
	p := len(off) - 1
	parts := make([]int32, off[p])
	for q := 0; q < p; q++ {
		for v := off[q]; v < off[q+1]; v++ {
			parts[v] = int32(q)
		}
	}
	return Partition{P: p, Parts: parts}
}

// Side is one rank's rows of one row set (train.RowSet): those it sends
// its peers and receives from them, how many peers each way, and the part
// of each that crosses to another node.
type Side struct {
	SendRows, RecvRows       int64
	SendPeers, RecvPeers     int
	OffSendRows, OffRecvRows int64 // to and from ranks on other nodes
	// PeerRows: the rows a product with each received block passes over,
	// summed over the peers: those that hold entries for this set's rows,
	// of each peer's block, or, where the blocks are shallow enough to be
	// merged (train.MergeRuns), of each run's.
	PeerRows int64
}

// Rank is what one rank holds and moves.
type Rank struct {
	Rows, Train   int
	NNZ, Diag     int64 // nonzeros of its rows of Â (self loops counted), of its diagonal block
	RowsWithPeers int64 // its rows with an entry in a peer's block
	Sets          [3]Side
}

// Counts are every rank's figures for one partition.
type Counts struct {
	P     int
	Ranks []Rank
}

// Count counts, for every rank, the rows of each row set its peers send
// it and it sends them, in one pass over the adjacency (O(nnz + P²)).
// ranksPerNode places ranks r·k … r·k+k−1 on node r (0: one node).
func Count(g Graph, part Partition, ranksPerNode int) (Counts, error) {
	n, p := g.Adj.Rows, part.P
	if len(part.Parts) != n || len(g.Train) != n {
		return Counts{}, fmt.Errorf("partition of %d nodes, training marks of %d, graph of %d", len(part.Parts), len(g.Train), n)
	}
	if ranksPerNode <= 0 {
		ranksPerNode = p
	}
	c := Counts{P: p, Ranks: make([]Rank, p)}
	members := make([][]int32, p)
	for v, q := range part.Parts {
		if q < 0 || int(q) >= p {
			return Counts{}, fmt.Errorf("node %d in part %d, outside 0..%d", v, q, p-1)
		}
		members[q] = append(members[q], int32(v))
		r := &c.Ranks[q]
		r.Rows++
		deg := g.Adj.RowPtr[v+1] - g.Adj.RowPtr[v]
		r.NNZ += deg + 1
		r.Diag++
		if g.Train[v] {
			r.Train++
		}
	}
	// For root j, count[s][i]: rows of j in set s that rank i receives;
	// last[s][i]: the last row of j counted for i.
	var count, last [3][]int64
	for s := range count {
		count[s], last[s] = make([]int64, p), make([]int64, p)
		for i := range last[s] {
			last[s][i] = -1
		}
	}
	runs, peerRows := mergedRuns(g, part)
	for i, n := range peerRows {
		c.Ranks[i].RowsWithPeers = n
	}
	// occ[s][v]: the last root (or run of roots) whose block has entries
	// in row v for set s.
	var occ [3][]int32
	for s := range occ {
		occ[s] = make([]int32, n)
		for v := range occ[s] {
			occ[s][v] = -1
		}
	}
	occupy := func(s train.RowSet, v, i int32, j int) {
		key := int32(j)
		if k := runs[s][i]; k < p-1 {
			peer := j
			if j > int(i) {
				peer--
			}
			key = int32(train.RunOf(peer, p-1, k))
		}
		if occ[s][v] != key {
			occ[s][v] = key
			c.Ranks[i].Sets[s].PeerRows++
		}
	}
	touched := make([]int32, 0, p)
	mark := make([]bool, p)
	share := int64(train.WholeBlockShare())
	for j := range p {
		touched = touched[:0]
		for _, u := range members[j] {
			for q := g.Adj.RowPtr[u]; q < g.Adj.RowPtr[u+1]; q++ {
				v := g.Adj.ColIdx[q]
				i := part.Parts[v]
				if int(i) == j {
					c.Ranks[j].Diag++
					continue
				}
				if !mark[i] {
					mark[i] = true
					touched = append(touched, i)
				}
				occupy(train.ViewRows, v, i, j)
				if g.Train[u] {
					occupy(train.TrainingRows, v, i, j)
				}
				if g.Train[v] {
					occupy(train.ReadByTraining, v, i, j)
				}
				if last[train.ViewRows][i] != int64(u) {
					last[train.ViewRows][i] = int64(u)
					count[train.ViewRows][i]++
					if g.Train[u] {
						count[train.TrainingRows][i]++
					}
				}
				if g.Train[v] && last[train.ReadByTraining][i] != int64(u) {
					last[train.ReadByTraining][i] = int64(u)
					count[train.ReadByTraining][i]++
				}
			}
		}
		rowsJ := int64(len(members[j]))
		for _, i := range touched {
			mark[i] = false
			if k := count[train.ViewRows][i]; k > 0 && 100*k >= share*rowsJ {
				count[train.ViewRows][i] = rowsJ // asked whole
			}
			off := int(i)/ranksPerNode != j/ranksPerNode
			for s := range count {
				k := count[s][i]
				count[s][i] = 0
				if k == 0 {
					continue
				}
				send, recv := &c.Ranks[j].Sets[s], &c.Ranks[i].Sets[s]
				send.SendRows += k
				send.SendPeers++
				recv.RecvRows += k
				recv.RecvPeers++
				if off {
					send.OffSendRows += k
					recv.OffRecvRows += k
				}
			}
		}
	}
	return c, nil
}

// mergedRuns is, for each row set and rank, how many runs its peers'
// blocks merge into (train.MergeRuns): from its entries in peers' blocks
// and its rows that hold any, which it returns too (the view's).
func mergedRuns(g Graph, part Partition) ([3][]int, []int64) {
	n, p := g.Adj.Rows, part.P
	var nnz, rows [3][]int64
	var runs [3][]int
	for s := range nnz {
		nnz[s], rows[s], runs[s] = make([]int64, p), make([]int64, p), make([]int, p)
	}
	var in [3]bool
	for v := range n {
		i := part.Parts[v]
		var any [3]bool
		for q := g.Adj.RowPtr[v]; q < g.Adj.RowPtr[v+1]; q++ {
			u := g.Adj.ColIdx[q]
			if part.Parts[u] == i {
				continue
			}
			in[train.ViewRows], in[train.TrainingRows], in[train.ReadByTraining] = true, g.Train[u], g.Train[v]
			for s, ok := range in {
				if ok {
					nnz[s][i]++
					any[s] = true
				}
			}
		}
		for s, ok := range any {
			if ok {
				rows[s][i]++
			}
		}
	}
	for s := range runs {
		for i := range p {
			runs[s][i] = train.MergeRuns(nnz[s][i], rows[s][i], p-1)
		}
	}
	return runs, rows[train.ViewRows]
}

// GraphOf is what counting reads of a loaded dataset.
func GraphOf(ds *graph.Dataset) Graph {
	tr := make([]bool, ds.N)
	for _, v := range ds.Train {
		tr[v] = true
	}
	return Graph{Adj: ds.Adj, Train: tr}
}

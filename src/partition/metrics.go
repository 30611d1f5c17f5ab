package partition

import "sancus/kernels/matrix"

// Metrics measure a partition of a graph (the literature's names).
type Metrics struct {
	Parts             int       `json:"parts"`
	EdgeCut           float64   `json:"edge_cut_fraction"`  // |{(u,v): part(u) ≠ part(v)}| / |E|
	Replication       float64   `json:"replication_factor"` // Σ_i |V_i ∪ halo_i| / |V|
	RowBalance        float64   `json:"row_balance"`        // max / mean
	NNZBalance        float64   `json:"nnz_balance"`
	TrainBalance      float64   `json:"train_balance"`
	SendBalance       float64   `json:"send_balance"` // of the rows each part sends the others
	Locality          []float64 `json:"locality"`     // nnz(Â_ii) / nnz(Â_i,:), self loops counted
	NonEmptyOffDiag   int       `json:"nonempty_offdiag_blocks"`
	RowsNeeded        [][]int   `json:"rows_needed"` // [i][j]: rows of part j that part i's block uses
	RowsNeededFrac    float64   `json:"rows_needed_fraction"`
	Rows, NNZ, Trains []int     `json:"-"`
}

// Measure computes the metrics of parts (nil: contiguous ranges given by
// offsets) on the symmetric adjacency adj (no self loops).
func Measure(adj *matrix.CSR, parts []int32, offsets []int64, p int, train []int32) Metrics {
	n := adj.Rows
	if parts == nil {
		parts = make([]int32, n)
		for q := 0; q < p; q++ {
			for v := offsets[q]; v < offsets[q+1]; v++ {
				parts[v] = int32(q)
			}
		}
	}
	m := Metrics{Parts: p, Rows: make([]int, p), NNZ: make([]int, p), Trains: make([]int, p), RowsNeeded: make([][]int, p)}
	for i := range m.RowsNeeded {
		m.RowsNeeded[i] = make([]int, p)
	}
	diag := make([]int, p)
	var cut int64
	seen := make([]int32, p) // last node that marked part i as needing it
	for i := range seen {
		seen[i] = -1
	}
	for v := 0; v < n; v++ {
		pv := parts[v]
		m.Rows[pv]++
		m.NNZ[pv] += int(adj.RowPtr[v+1]-adj.RowPtr[v]) + 1
		diag[pv]++ // the self loop of Â
		for q := adj.RowPtr[v]; q < adj.RowPtr[v+1]; q++ {
			pu := parts[adj.ColIdx[q]]
			if pu == pv {
				diag[pv]++
				continue
			}
			cut++
			if seen[pu] != int32(v) { // part pu's rows reference v
				seen[pu] = int32(v)
				m.RowsNeeded[pu][pv]++
			}
		}
	}
	for _, t := range train {
		m.Trains[parts[t]]++
	}
	if adj.NNZ() > 0 {
		m.EdgeCut = float64(cut) / float64(adj.NNZ())
	}
	var repl, needed int
	for i := 0; i < p; i++ {
		repl += m.Rows[i]
		for j := 0; j < p; j++ {
			repl += m.RowsNeeded[i][j]
			needed += m.RowsNeeded[i][j]
			if i != j && m.RowsNeeded[i][j] > 0 {
				m.NonEmptyOffDiag++
			}
		}
		m.Locality = append(m.Locality, float64(diag[i])/float64(max(1, m.NNZ[i])))
	}
	m.Replication = float64(repl) / float64(max(1, n))
	if p > 1 {
		m.RowsNeededFrac = float64(needed) / float64(n*(p-1))
	}
	m.balances()
	return m
}

// balances sets every max/mean: of rows, nonzeros, training nodes, and the
// rows each part sends (part j's, Σ_i≠j RowsNeeded[i][j]: what the sparse
// exchange moves from it).
func (m *Metrics) balances() {
	sent := make([]int, m.Parts)
	for i, row := range m.RowsNeeded {
		for j, k := range row {
			if i != j {
				sent[j] += k
			}
		}
	}
	m.RowBalance, m.NNZBalance, m.TrainBalance, m.SendBalance = balance(m.Rows), balance(m.NNZ), balance(m.Trains), balance(sent)
}

func balance(xs []int) float64 {
	var sum, mx float64
	for _, x := range xs {
		sum += float64(x)
		mx = max(mx, float64(x))
	}
	if sum == 0 {
		return 1
	}
	return mx / (sum / float64(len(xs)))
}

// PartBlocks is what one part's shard says about the partition: its rows,
// the nonzeros of its rows of Â (self loops included) and of its diagonal
// block, the rows it uses from every part, its training nodes.
type PartBlocks struct {
	Rows   int
	NNZ    int64
	Diag   int64
	Needed []int // Needed[j]: rows of part j referenced (j == self: ignored)
	Train  int
}

// FromBlocks computes the metrics from per-part block figures, for a
// preparation that never holds the whole adjacency.
func FromBlocks(parts []PartBlocks) Metrics {
	p := len(parts)
	m := Metrics{Parts: p, Rows: make([]int, p), NNZ: make([]int, p), Trains: make([]int, p), RowsNeeded: make([][]int, p)}
	var n, offDiag, edges, needed int64
	for i, b := range parts {
		m.Rows[i], m.NNZ[i], m.Trains[i] = b.Rows, int(b.NNZ), b.Train
		n += int64(b.Rows)
		offDiag += b.NNZ - b.Diag
		edges += b.NNZ - int64(b.Rows) // without self loops
		m.RowsNeeded[i] = make([]int, p)
		for j, k := range b.Needed {
			if j == i {
				continue
			}
			m.RowsNeeded[i][j] = k
			needed += int64(k)
			if k > 0 {
				m.NonEmptyOffDiag++
			}
		}
		m.Locality = append(m.Locality, float64(b.Diag)/float64(max(1, b.NNZ)))
	}
	if edges > 0 {
		m.EdgeCut = float64(offDiag) / float64(edges)
	}
	m.Replication = float64(n+needed) / float64(max(1, n))
	if p > 1 {
		m.RowsNeededFrac = float64(needed) / float64(n*int64(p-1))
	}
	m.balances()
	return m
}

package partition

import "sancus/kernels/matrix"

// Metrics measure a partition of a graph (the literature's names).
type Metrics struct {
	Parts           int       `json:"parts"`
	EdgeCut         float64   `json:"edge_cut_fraction"`  // |{(u,v): part(u) ≠ part(v)}| / |E|
	Replication     float64   `json:"replication_factor"` // Σ_i |V_i ∪ halo_i| / |V|
	RowBalance      float64   `json:"row_balance"`        // max / mean
	NNZBalance      float64   `json:"nnz_balance"`
	TrainBalance    float64   `json:"train_balance"`
	ValBalance      float64   `json:"val_balance,omitempty"`
	TestBalance     float64   `json:"test_balance,omitempty"`
	SendBalance     float64   `json:"send_balance"` // of the rows each part sends the others
	Locality        []float64 `json:"locality"`     // nnz(Â_ii) / nnz(Â_i,:), self loops counted
	NonEmptyOffDiag int       `json:"nonempty_offdiag_blocks"`
	RowsNeeded      [][]int   `json:"rows_needed"` // [i][j]: rows of part j that part i's block uses
	RowsNeededFrac  float64   `json:"rows_needed_fraction"`
	// SampledLocal is the expected share of sampled neighbours that are
	// local under Fanouts (SampledLocality); 0 where not measured.
	SampledLocal float64 `json:"sampled_local_fraction,omitempty"`
	// MicroLocal is HopGNN's R_micro (MicrographLocality) for the same
	// sampler: what a model that moves to each root reads locally.
	MicroLocal        float64 `json:"micrograph_local_fraction,omitempty"`
	Fanouts           []int   `json:"fanouts,omitempty"`
	Rows, NNZ, Trains []int   `json:"-"`
	Vals, Tests       []int   `json:"-"`
}

// Measure computes the metrics of parts (nil: contiguous ranges given by
// offsets) on the symmetric adjacency adj (no self loops), with each
// split's balance.
func Measure(adj *matrix.CSR, parts []int32, offsets []int64, p int, sp Splits) Metrics {
	n := adj.Rows
	parts = Expand(parts, offsets, n)
	m := Metrics{Parts: p, Rows: make([]int, p), NNZ: make([]int, p), Trains: make([]int, p), Vals: make([]int, p), Tests: make([]int, p),
		RowsNeeded: make([][]int, p)}
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
	for i, set := range [][]int32{sp.Train, sp.Val, sp.Test} {
		count := [][]int{m.Trains, m.Vals, m.Tests}[i]
		for _, v := range set {
			count[parts[v]]++
		}
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
	m.ValBalance, m.TestBalance = balance(m.Vals), balance(m.Tests)
}

// Expand returns parts, or where it is nil the parts of the contiguous
// ranges offsets.
func Expand(parts []int32, offsets []int64, n int) []int32 {
	if parts != nil {
		return parts
	}
	parts = make([]int32, n)
	for q := 0; q+1 < len(offsets); q++ {
		for v := offsets[q]; v < offsets[q+1]; v++ {
			parts[v] = int32(q)
		}
	}
	return parts
}

// SampledLocality is the share of sampled neighbours that are local: of
// the edges a K-hop neighbour sampler with these fanouts draws from the
// seeds, the fraction whose sampled endpoint lies in the part of the
// vertex that samples it (and so needs no remote read). It is the
// expected value, computed exactly rather than drawn: hop h's frontier
// vertex v of degree d samples each neighbour with probability
// min(1, f_h/d) (uniform, without replacement), and a vertex's weight in
// the next frontier is the expected number of times it was sampled. Every
// seed's sampling tree counts on its own: a vertex reached twice samples
// twice, as when each seed's neighbourhood is drawn independently (a
// mini-batch that merges repeats samples it once). Where nothing is
// sampled (no seeds, or seeds without neighbours) it is 1: nothing is
// read remotely. Time O(K·nnz).
func SampledLocality(adj *matrix.CSR, parts []int32, offsets []int64, seeds []int32, fanouts []int) float64 {
	n := adj.Rows
	parts = Expand(parts, offsets, n)
	w := make([]float64, n)
	for _, v := range seeds {
		w[v]++
	}
	next := make([]float64, n)
	var local, all float64
	for _, f := range fanouts {
		clear(next)
		for v := range n {
			if w[v] == 0 {
				continue
			}
			row := adj.ColIdx[adj.RowPtr[v]:adj.RowPtr[v+1]]
			if len(row) == 0 {
				continue
			}
			pr := min(1, float64(f)/float64(len(row)))
			all += w[v] * pr * float64(len(row))
			for _, u := range row {
				next[u] += w[v] * pr
				if parts[u] == parts[v] {
					local += w[v] * pr
				}
			}
		}
		w, next = next, w
	}
	if all == 0 {
		return 1
	}
	return local / all
}

// MicrographLocality is HopGNN's R_micro: of the vertices in the
// micrographs of the seeds (a root and the K-hop neighbourhood the
// sampler draws from it, root included), the share that lie in the
// root's part, so that a model that moves to the root's part reads them
// there. Expected values as SampledLocality's, every draw counted (a
// vertex drawn twice in one micrograph counts twice, where HopGNN counts
// it once). Time O(P·K·nnz): one walk per part, from its roots.
func MicrographLocality(adj *matrix.CSR, parts []int32, offsets []int64, seeds []int32, fanouts []int) float64 {
	n := adj.Rows
	parts = Expand(parts, offsets, n)
	var byPart [][]int32 // the roots of each part, summed in part order: the same figure every run
	for _, v := range seeds {
		for int(parts[v]) >= len(byPart) {
			byPart = append(byPart, nil)
		}
		byPart[parts[v]] = append(byPart[parts[v]], v)
	}
	w, next := make([]float64, n), make([]float64, n)
	var local, all float64
	for qi, roots := range byPart {
		q := int32(qi)
		clear(w)
		for _, v := range roots {
			w[v]++
		}
		local += float64(len(roots)) // the roots themselves
		all += float64(len(roots))
		for _, f := range fanouts {
			clear(next)
			for v := range n {
				row := adj.ColIdx[adj.RowPtr[v]:adj.RowPtr[v+1]]
				if w[v] == 0 || len(row) == 0 {
					continue
				}
				pr := w[v] * min(1, float64(f)/float64(len(row)))
				all += pr * float64(len(row))
				for _, u := range row {
					next[u] += pr
					if parts[u] == q {
						local += pr
					}
				}
			}
			w, next = next, w
		}
	}
	if all == 0 {
		return 1
	}
	return local / all
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
	Val    int
	Test   int
}

// FromBlocks computes the metrics from per-part block figures, for a
// preparation that never holds the whole adjacency.
func FromBlocks(parts []PartBlocks) Metrics {
	p := len(parts)
	m := Metrics{Parts: p, Rows: make([]int, p), NNZ: make([]int, p), Trains: make([]int, p), Vals: make([]int, p), Tests: make([]int, p),
		RowsNeeded: make([][]int, p)}
	var n, offDiag, edges, needed int64
	for i, b := range parts {
		m.Rows[i], m.NNZ[i], m.Trains[i], m.Vals[i], m.Tests[i] = b.Rows, int(b.NNZ), b.Train, b.Val, b.Test
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

package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"sancus/launch"

	"github.com/spf13/pflag"

	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/partition"
	"sancus/src/prepare"
)

type partFlags struct {
	kind      partition.Kind
	balanceBy partition.BalanceBy
	opt       partition.Options
	chunkFrac float64
	edgeRF    float64 // dbh, hdrf: the edge partition's replication factor
	edgeFull  float64 // and with full neighbour lists (CATGNN's Figure 6)
	// load is how the dataset's split is read, for a partitioner that
	// balances it; nodes is what that read, for prepare to reuse.
	load  graph.LoadOptions
	nodes *graph.Dataset
}

func addPartitionFlags(fs *pflag.FlagSet) *partFlags {
	pf := &partFlags{opt: partition.DefaultOptions()}
	fs.Var(&pf.kind, "partitioner", "contiguous, random, spring, grem, dbh, hdrf (edge partitioners: a node goes where most of its edges are), bytegnn (ByteGNN's multi-hop blocks around the training, validation and test nodes, each split's count equal across parts), or file")
	fs.StringVar(&pf.opt.File, "parts-file", "", "with --partitioner file: one part id per line (e.g. gpmetis output)")
	fs.Float64Var(&pf.opt.Balance, "balance", pf.opt.Balance, "β: a part holds at most β·|V|/P nodes (spring, grem, dbh, hdrf, bytegnn)")
	fs.Var(&pf.balanceBy, "balance-by", "what parts are equal in: rows; nnz (nonzeros of Â within 3%, rows kept within β, moving the nodes least attached to their part); train (training nodes, swapped one for one so rows stay: what a sampled step's work follows; contiguous: equal row ranges first); auto: nnz where equal rows are over 10% unequal in nonzeros (contiguous ranges: always nnz; bytegnn: rows, keeping its split counts equal)")
	fs.Lookup("balance-by").DefValue = "auto"
	fs.IntVar(&pf.opt.ChunkEdges, "chunk-edges", pf.opt.ChunkEdges, "grem: edges per in-memory chunk, seeded by multilevel bisection (more: better cut, more memory)")
	fs.Float64Var(&pf.chunkFrac, "chunk-frac", 0, "grem: chunk as a fraction of the graph's edges (the paper uses 0.01-0.1); overrides --chunk-edges")
	fs.IntVar(&pf.opt.Refine, "refine", pf.opt.Refine, "spring, grem, bytegnn: passes of label-propagation refinement afterwards (streaming; bytegnn: within its split bounds)")
	fs.IntVar(&pf.opt.Passes, "passes", pf.opt.Passes, "grem: passes over the edge stream per bisection (1: as published)")
	fs.Float64Var(&pf.opt.TauVol, "tau-vol", 0, "spring: cluster volume threshold (0: 2|E|/P)")
	fs.IntVar(&pf.opt.Hops, "block-hops", 2, "bytegnn: hops of a block around each training, validation and test node (a K-layer sampler's K)")
	fs.Uint64Var(&pf.opt.Seed, "partition-seed", pf.opt.Seed, "random, bytegnn: seed")
	return pf
}

// label names the partitioner and, when set, its chunk fraction.
func (pf *partFlags) label() string {
	if pf.chunkFrac > 0 {
		return fmt.Sprintf("%v@%g", pf.kind, pf.chunkFrac)
	}
	return pf.kind.String()
}

// run streams the graph file through the partitioner (nil for contiguous).
func (pf *partFlags) run(data string, p int) ([]int32, time.Duration, error) {
	// Parsing leaves short-lived garbage on every line; a tight GC target
	// keeps the peak near the partitioner's live O(|V| + chunk) state.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	if b := pf.opt.Balance; !(b >= 1 && b <= 100) {
		return nil, 0, fmt.Errorf("--balance %g: β must be in [1, 100] (a part holds at most β·|V|/P nodes)", b)
	}
	if pf.opt.Hops < 1 {
		return nil, 0, fmt.Errorf("--block-hops %d: a block reaches at least 1 hop", pf.opt.Hops)
	}
	start := time.Now()
	s, err := graph.OpenEdgeStream(data)
	if err != nil {
		return nil, 0, err
	}
	if pf.chunkFrac > 0 {
		edges := 0
		if err := s.Each(func(u, v int32) error { edges++; return nil }); err != nil {
			return nil, 0, err
		}
		pf.opt.ChunkEdges = max(1000, int(pf.chunkFrac*float64(edges)))
	}
	by := pf.balanceBy
	if pf.kind.BalancesSplits() || by == partition.BalanceTrain {
		// The split is read as prepare reads it (the same flags).
		if pf.nodes, err = graph.LoadNodeData(data, s.N, pf.load); err != nil {
			return nil, 0, fmt.Errorf("--partitioner %v reads the split: %w", pf.kind, err)
		}
		pf.opt.Splits = partition.Splits{Train: pf.nodes.Train, Val: pf.nodes.Val, Test: pf.nodes.Test}
	}
	var parts []int32
	if pf.kind.CutsEdges() {
		ep, err := partition.PartitionEdges(pf.kind, s, p, pf.opt, nil)
		if err != nil {
			return nil, 0, err
		}
		parts, pf.edgeRF, pf.edgeFull = ep.Master, ep.Replication, ep.FullReplication
		if ep.EdgeBalance > farOutOfBalance || ep.MasterBalance > farOutOfBalance {
			fmt.Fprintf(os.Stderr, "sancus: warning: %v's parts are far out of balance: the largest holds %.2f× the mean edges, and %.2f× the mean vertices before the vertex parts are capped at %.2f×; its replication factor describes that partition, not a balanced one\n",
				pf.kind, ep.EdgeBalance, ep.MasterBalance, max(pf.opt.Balance, 1))
		}
	} else if parts, err = partition.Partition(pf.kind, s, p, pf.opt); err != nil {
		return nil, 0, err
	}
	rowBound := max(pf.opt.Balance, 1.05) // what a part's rows stay within, over the mean
	if parts != nil && !pf.kind.Given() {
		if err := partition.Check(parts, p, rowBound+1e-9); err != nil {
			return nil, 0, fmt.Errorf("%v partition: %w", pf.kind, err)
		}
	}
	if by == partition.BalanceAuto && pf.kind.BalancesSplits() {
		by = partition.BalanceRows // moving nodes for nonzeros would unbalance the splits
	}
	if parts == nil && (by == partition.BalanceRows || by == partition.BalanceTrain) { // equal row ranges
		parts = make([]int32, s.N)
		for v := range parts {
			parts[v] = int32(int64(v) * int64(p) / int64(s.N))
		}
	}
	switch {
	case by == partition.BalanceTrain:
		before, after := partition.BalanceTraining(parts, p, pf.nodes.Train)
		fmt.Printf("balanced by training nodes: the largest of %d parts %.3f → %.3f× the mean, rows unchanged\n", p, before, after)
	case parts != nil:
		before, after, err := partition.BalanceNonzeros(s, parts, p, by, 0.03, rowBound)
		if err != nil {
			return nil, 0, err
		}
		if after != before {
			fmt.Printf("balanced by nonzeros of Â: the largest of %d parts %.3f → %.3f× the mean\n", p, before, after)
		}
	}
	return parts, time.Since(start), nil
}

// farOutOfBalance is the largest part over the mean past which a
// partition's figures describe a lopsided split, and partition-stats says so.
const farOutOfBalance = 1.5

// partitionWords says a partition's figures in words with their units,
// alike wherever sancus prints them (prepare, partition-stats, info).
func partitionWords(m partition.Metrics) string {
	return fmt.Sprintf("%.1f%% of edges cut; %.2f copies of a node on average (replication); largest part over the mean: %.2fx in rows, %.2fx in nonzeros, %.2fx in rows sent",
		100*m.EdgeCut, m.Replication, m.RowBalance, m.NNZBalance, m.SendBalance)
}

func printMetrics(k partition.Kind, m partition.Metrics) {
	fmt.Printf("partition %v, P=%d: %s; training nodes %.2fx, validation %.2fx, test %.2fx\n",
		k, m.Parts, partitionWords(m), m.TrainBalance, m.ValBalance, m.TestBalance)
	fmt.Printf("  each part's nonzeros inside its own rows (locality) %v; %d of %d blocks between parts non-empty; %.1f%% of rows needed from other parts\n",
		fmtFloats(m.Locality), m.NonEmptyOffDiag, m.Parts*(m.Parts-1), 100*m.RowsNeededFrac)
	if len(m.Fanouts) > 0 {
		fmt.Printf("  sampled neighbours local (fanouts %v from the training nodes, expected): %.4f; micrograph vertices in their root's part (HopGNN's R_micro): %.4f\n", fmtInts(m.Fanouts), m.SampledLocal, m.MicroLocal)
	}
}

func fmtInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func fmtFloats(xs []float64) string {
	s := "["
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.2f", x)
	}
	return s + "]"
}

// PartitionStats is one line of the partitioner benchmark.
type PartitionStats struct {
	Dataset     string  `json:"dataset"`
	Partitioner string  `json:"partitioner"`
	Seconds     float64 `json:"seconds"`
	PeakRSSMB   float64 `json:"peak_rss_mb"` // of the partitioning alone (the process does nothing else first)
	// EdgeReplication is an edge partitioner's replication factor (dbh, hdrf).
	EdgeReplication float64 `json:"edge_replication_factor,omitempty"`
	// EdgeFullReplication is the same with every part keeping the full
	// neighbour list of every vertex it holds (CATGNN's measure).
	EdgeFullReplication float64           `json:"edge_full_replication_factor,omitempty"`
	Metrics             partition.Metrics `json:"metrics"`
}

func runPartitionStats(args []string) error {
	fs := newFlags("partition-stats", "partition-stats --data DIR --parts P [--partitioner NAME] [--fanouts 15,10] [--out FILE]")
	data := fs.String("data", "", "dataset directory or graph file (required)")
	parts := fs.Int("parts", 0, "number of parts (required)")
	out := fs.String("out", "", "append the figures as a line of JSON to `FILE`")
	row := fs.Bool("row", false, "also print one tab-separated row: dataset partitioner P edge-cut replication row-balance nnz-balance seconds peak-MB; and a second, ROW-SPLITS: dataset partitioner P train-balance val-balance test-balance edge-cut sampled-local micrograph-local")
	fanouts := fs.IntSlice("fanouts", []int{15, 10}, "a sampler's neighbours per hop, for the share of sampled neighbours that lie in the sampling vertex's part (expected, under uniform sampling without replacement from the training nodes)")
	extSec := fs.Float64("external-seconds", 0, "with --partitioner file: time the external tool took (reported instead of reading the file)")
	extMB := fs.Float64("external-peak-mb", 0, "with --partitioner file: the external tool's peak memory")
	pf := addPartitionFlags(fs)
	load := graph.LoadOptions{Classes: -1} // labels unchecked: the split is what counts
	addSplitFlags(fs, &load, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || *parts < 1 {
		return fmt.Errorf("--data and --parts ≥ 1 are required")
	}
	if err := outFile(*out, "the file the figures are appended to (JSON lines)", "partition-stats.json"); err != nil {
		return err
	}
	for _, f := range *fanouts {
		if f < 1 {
			return fmt.Errorf("--fanouts %s: each hop samples at least 1 neighbour", fmtInts(*fanouts))
		}
	}
	pf.load = load
	assign, took, err := pf.run(*data, *parts)
	if err != nil {
		return err
	}
	// Peak memory is read before the whole graph is loaded for measuring.
	peak := launch.PeakRSSMB()
	ds, err := graph.Load(*data, load)
	if err != nil {
		return err
	}
	var offsets []int64
	if assign == nil { // contiguous ranges, cut by nonzeros of Â as prepare cuts them
		rows := &matrix.CSR{Rows: ds.N, RowPtr: make([]int64, ds.N+1)}
		for v := range ds.N {
			rows.RowPtr[v+1] = rows.RowPtr[v] + ds.Adj.RowPtr[v+1] - ds.Adj.RowPtr[v] + 1
		}
		if offsets, err = prepare.BalancedRanges(rows, *parts); err != nil {
			return err
		}
	}
	m := partition.Measure(ds.Adj, assign, offsets, *parts, partition.Splits{Train: ds.Train, Val: ds.Val, Test: ds.Test})
	if len(ds.Train) > 0 { // nothing is sampled without training nodes
		m.Fanouts = *fanouts
		m.SampledLocal = partition.SampledLocality(ds.Adj, assign, offsets, ds.Train, *fanouts)
		m.MicroLocal = partition.MicrographLocality(ds.Adj, assign, offsets, ds.Train, *fanouts)
	}
	secs := took.Seconds()
	if *extSec > 0 || *extMB > 0 {
		secs, peak = *extSec, *extMB
	}
	fmt.Printf("%s: %.2fs, peak memory %.1f MB\n", *data, secs, peak)
	printMetrics(pf.kind, m)
	// CATGNN's replication factor: a vertex partition's with full
	// neighbour lists (Σ|V_i ∪ N(V_i)|/|V|); an edge partition's replicas
	// per vertex, and the same with full neighbour lists kept.
	rf, full := m.Replication, m.Replication
	if pf.edgeRF > 0 {
		rf, full = pf.edgeRF, pf.edgeFull
		fmt.Printf("  edge partition: replication factor %.3f (each edge in one part), %.3f with every part keeping its vertices' full neighbour lists; the figures above are its nodes' parts\n", rf, full)
	}
	if *row {
		fmt.Printf("ROW\t%s\t%s\t%d\t%.4f\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t%.1f\n", *data, pf.label(), *parts, m.EdgeCut, rf, full, m.RowBalance, m.NNZBalance, secs, peak)
		fmt.Printf("ROW-SPLITS\t%s\t%s\t%d\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n", *data, pf.label(), *parts, m.TrainBalance, m.ValBalance, m.TestBalance, m.EdgeCut, m.SampledLocal, m.MicroLocal)
	}
	if *out != "" {
		return appendJSONLine(*out, PartitionStats{Dataset: *data, Partitioner: pf.label(), Seconds: secs, PeakRSSMB: peak,
			EdgeReplication: pf.edgeRF, EdgeFullReplication: pf.edgeFull, Metrics: m})
	}
	return nil
}

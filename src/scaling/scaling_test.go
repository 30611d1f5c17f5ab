package scaling

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sancus/collectives/wire"
	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/model"
	"sancus/src/prepare"
	"sancus/src/result"
	"sancus/src/shard"
	"sancus/src/train"
)

func cora(t *testing.T) *graph.Dataset {
	ds, err := graph.Load(filepath.Join("..", "..", "testdata", "cora"), graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func generated(t *testing.T) *graph.Dataset {
	dir := t.TempDir()
	cfg := graph.GenConfig{Model: "planted", Nodes: 1500, Edges: 9000, Features: 32, FeatureNNZ: 6,
		Classes: 5, PIn: 0.7, FeatureSig: 0.5, TrainFrac: 0.1, ValFrac: 0.1, Seed: 5}
	if err := graph.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	ds, err := graph.Load(dir, graph.LoadOptions{NormalizeFeatures: true})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// runStats trains ds on p in-process ranks for epochs epochs (evaluating
// after the last only) and returns every rank's statistics.
func runStats(t *testing.T, ds *graph.Dataset, p, epochs int, cfg train.Config) []result.RankStats {
	t.Helper()
	prep, err := prepare.InMemory(ds, p, prepare.Options{Precompute: shard.Aggregations})
	if err != nil {
		t.Fatal(err)
	}
	shards, err := prep.Shards()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Optim.Epochs, cfg.Run.EvalEvery = epochs, 0
	out, err := train.RunShards(shards, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out.Result.PerRank
}

// An epoch's bytes per rank, as plan counts them from the partition, are
// what a real run's ranks report: the difference of a three-epoch and a
// one-epoch run is two training epochs, set-up and the final evaluation
// cancelling out.
func TestCountsMatchRun(t *testing.T) {
	graphs := map[string]*graph.Dataset{"cora": cora(t), "generated": generated(t)}
	for name, ds := range graphs {
		g := GraphOf(ds)
		for _, p := range []int{2, 4} {
			part, err := Contiguous(g, p)
			if err != nil {
				t.Fatal(err)
			}
			counts, err := Count(g, part, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				arch model.Arch
				w    wire.Format
				full bool
			}{{model.ArchGCN, wire.FP32, false}, {model.ArchGCN, wire.Format(8), false}, {model.ArchGCN, wire.FP32, true}, {model.ArchSAGE, wire.Format(8), false}, {model.ArchGAT, wire.Format(8), false}} {
				cfg := train.Defaults()
				cfg.Model.Arch, cfg.Wire.Fwd, cfg.Exchange.FullOutput = tc.arch, tc.w, tc.full
				cfg.Model.Layers = 3
				flows, err := cfg.Flows(ds.Features.Cols, ds.Classes)
				if err != nil {
					t.Fatal(err)
				}
				params, err := cfg.ParamCount(ds.Features.Cols, ds.Classes)
				if err != nil {
					t.Fatal(err)
				}
				one, three := runStats(t, ds, p, 1, cfg), runStats(t, ds, p, 3, cfg)
				for r := range p {
					want := RankTraffic(counts, r, flows, params, cfg.Wire.Allreduce)
					sent := (three[r].BytesSent - one[r].BytesSent) / 2
					recv := (three[r].BytesRecv - one[r].BytesRecv) / 2
					if want.ExchSent == 0 && p > 1 {
						t.Errorf("%s P=%d rank %d: no exchange counted", name, p, r)
					}
					if sent != want.Sent || recv != want.Recv {
						t.Errorf("%s P=%d %v %v full-output=%v rank %d: run sent %d recv %d an epoch, counted %d and %d",
							name, p, tc.arch, tc.w, tc.full, r, sent, recv, want.Sent, want.Recv)
					}
				}
			}
		}
	}
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }

// A replayed rank sends and receives, each epoch, what the same rank of a
// real run does.
func TestReplayMatchesRun(t *testing.T) {
	ds := cora(t)
	for _, p := range []int{2, 4} {
		for _, tc := range []struct {
			w    wire.Format
			full bool
		}{{wire.FP32, false}, {wire.Format(8), false}, {wire.FP32, true}} {
			cfg := train.Defaults()
			cfg.Wire.Fwd, cfg.Exchange.FullOutput, cfg.Model.Layers = tc.w, tc.full, 3
			one, three := runStats(t, ds, p, 1, cfg), runStats(t, ds, p, 3, cfg)
			prep, err := prepare.InMemory(ds, p, prepare.Options{Precompute: shard.Aggregations})
			if err != nil {
				t.Fatal(err)
			}
			for r := range p {
				own, peers, err := ReplaySetup(prep.Shard, p, r)
				if err != nil {
					t.Fatal(err)
				}
				rp, err := train.NewReplay(cfg, own, peers)
				if err != nil {
					t.Fatal(err)
				}
				eps, err := rp.Epochs(2)
				rp.Close()
				if err != nil {
					t.Fatal(err)
				}
				sent := (three[r].BytesSent - one[r].BytesSent) / 2
				recv := (three[r].BytesRecv - one[r].BytesRecv) / 2
				for _, ep := range eps {
					if ep.Sent != sent || ep.Recv != recv {
						t.Errorf("P=%d %v full-output=%v rank %d: replay sent %d recv %d an epoch, the run %d and %d", p, tc.w, tc.full, r, ep.Sent, ep.Recv, sent, recv)
					}
				}
			}
		}
	}
}

// TestFitTellsRatesApartOrSaysItCannot: samples whose sparse and dense
// flops vary apart give each its rate; samples with no sparse flops give
// one rate for both, and say so.
func TestFitTellsRatesApartOrSaysItCannot(t *testing.T) {
	const sp, ge, blk = 10e9, 100e9, 20e-6 // flop/s, flop/s, s a block
	sample := func(s, g, b float64) Sample {
		return Sample{Work: Work{SpMM: s, GEMM: g, Blocks: b}, Seconds: s/sp + g/ge + b*blk}
	}
	r, err := Fit([]Sample{sample(1e9, 1e9, 2), sample(3e8, 2e9, 6), sample(2e8, 5e8, 30), sample(5e8, 8e8, 14)})
	if err != nil || r.OneRate || math.Abs(r.SpMMGflops-10)/10 > 1e-6 || math.Abs(r.GEMMGflops-100)/100 > 1e-6 {
		t.Fatalf("apart: %+v, %v", r, err)
	}
	r, err = Fit([]Sample{sample(0, 1e9, 2), sample(0, 2e9, 6), sample(0, 5e8, 30)})
	if err != nil || !r.OneRate || r.SpMMGflops != r.GEMMGflops {
		t.Fatalf("no sparse flops: %+v, %v", r, err)
	}
}

// TestFitSeparatesBlocksAndPassedValues: ranks replayed at small and large
// P (flops falling as 1/P, blocks growing as P, row values passed about
// constant) give back the rates that made their timings, and predict a P
// not fitted; a per-block cost no engine has is refused, naming the flag.
func TestFitSeparatesBlocksAndPassedValues(t *testing.T) {
	const rate, blk, row = 20e9, 3e-6, 2e-9 // flop/s, s a block, s a row value passed
	at := func(p float64) Sample {
		w := Work{SpMM: 4e8 / p, GEMM: 6e9 / p, Blocks: 4 * (p - 1), PassedValues: 1.1e6 * (1 - 1/p)}
		return Sample{Work: w, Seconds: (w.SpMM+w.GEMM)/rate + w.Blocks*blk + w.PassedValues*row}
	}
	var fit []Sample
	for _, p := range []float64{8, 32, 128, 1024} {
		fit = append(fit, at(p))
	}
	r, err := Fit(fit)
	if err != nil {
		t.Fatal(err)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-6*math.Abs(want) }
	if !near(r.SpMMGflops, 20) || !near(r.GEMMGflops, 20) || !near(r.BlockUs, 3) || !near(r.PassNs, 2) {
		t.Fatalf("fitted %+v, want 20 GFLOP/s, 3 µs a block, 2 ns a row value", r)
	}
	for _, p := range []float64{64, 256, 512} {
		if s := at(p); !near(s.Work.Seconds(r), s.Seconds) {
			t.Errorf("P = %g: predicted %g s, made %g s", p, s.Work.Seconds(r), s.Seconds)
		}
	}
	// The same ranks with a loaded machine's milliseconds on the blocks.
	for k := range fit {
		fit[k].Seconds += fit[k].Work.Blocks * 5e-3
	}
	if _, err := Fit(fit); err == nil || !strings.Contains(err.Error(), "--calibrate") || !strings.Contains(err.Error(), "--block-us") {
		t.Fatalf("a 5 ms block: %v, want a refusal naming --calibrate and --block-us", err)
	}
}

// TestFitSeparatesBytesPacked: wide rows (GCN 3×256) make the bytes a
// rank packs and takes in cost apart from its flops, since they fall
// more slowly with P: replays at five P give back a per-byte cost as well
// as the flop rate and the per-block cost, and predict a P not fitted.
func TestFitSeparatesBytesPacked(t *testing.T) {
	const rate, blk, byt = 30e9, 4e-6, 0.3e-9 // flop/s, s a block, s a byte
	at := func(p float64) Sample {
		w := Work{SpMM: 2e10 / p, GEMM: 5e11 / p, Blocks: 6 * (p - 1), Bytes: 4e9 * (1 - 1/p) / math.Sqrt(p)}
		return Sample{Work: w, Seconds: (w.SpMM+w.GEMM)/rate + w.Blocks*blk + w.Bytes*byt}
	}
	var fit []Sample
	for _, p := range []float64{4, 8, 16, 32, 64} {
		fit = append(fit, at(p))
	}
	r, err := Fit(fit)
	if err != nil {
		t.Fatal(err)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-6*math.Abs(want) }
	if !near(r.GEMMGflops, 30) || !near(r.BlockUs, 4) || !near(r.ByteNs, 0.3) {
		t.Fatalf("fitted %+v, want 30 GFLOP/s, 4 µs a block, 0.3 ns a byte", r)
	}
	if s := at(128); !near(s.Work.Seconds(r), s.Seconds) {
		t.Errorf("P = 128: predicted %g s, made %g s", s.Work.Seconds(r), s.Seconds)
	}
}

// A received block's product passes the rows it has entries in, the
// restricted last layer's too: each flow counts its row set's occupied
// rows of the peers' blocks, each row its flow's width of values.
func TestWorkCountsRowsPassed(t *testing.T) {
	flows, err := train.Defaults().Flows(128, 16)
	if err != nil {
		t.Fatal(err)
	}
	var r Rank
	r.Rows, r.Train = 100, 10
	want := 0.0
	for k, f := range flows {
		r.Sets[f.Rows].PeerRows = int64(k + 3)
		want += float64(k+3) * float64(f.Width)
	}
	if got := (Model{Dims: []int{128, 16, 16}, Flows: flows}).WorkOf(r).PassedValues; got != want {
		t.Errorf("row values passed %g, want %g (flows %+v)", got, want, flows)
	}
}

// The rows counted as passed are the rows of each rank's peer blocks
// that hold entries, by row set: a path 0-1-2-3 over two ranks {0, 1},
// {2, 3}, node 2 alone training.
func TestCountsOccupiedPeerRows(t *testing.T) {
	adj := &matrix.CSR{Rows: 4, Cols: 4, RowPtr: []int64{0, 1, 3, 5, 6}, ColIdx: []int32{1, 0, 2, 1, 3, 2}, Val: []float32{1, 1, 1, 1, 1, 1}}
	g := Graph{Adj: adj, Train: []bool{false, false, true, false}}
	c, err := Count(g, Partition{P: 2, Parts: []int32{0, 0, 1, 1}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Rank 0's block of rank 1 has row 1 (edge 1-2, column 2 training);
	// rank 1's of rank 0, row 2 (a training row; column 1 not).
	for r, want := range [][3]int64{{1, 0, 1}, {1, 1, 0}} {
		s := c.Ranks[r].Sets
		if got := [3]int64{s[train.ViewRows].PeerRows, s[train.ReadByTraining].PeerRows, s[train.TrainingRows].PeerRows}; got != want {
			t.Errorf("rank %d: occupied peer rows (view, read by training, training) %v, want %v", r, got, want)
		}
	}
}

// Ranks outnumbering the cores they share take turns: a node's cores, or,
// with HostCores, one host's shared by every node's ranks; a row below
// the full cluster is charged its own placement's share.
func TestShareCountsTheCoresRanksShare(t *testing.T) {
	for _, tc := range []struct {
		cl     Cluster
		p, rpn int
		want   float64
	}{
		{Cluster{Nodes: 4, RanksPerNode: 2, HostCores: 2}, 8, 2, 4}, // 8 ranks on one 2-core host
		{Cluster{Nodes: 4, RanksPerNode: 2, HostCores: 2}, 4, 1, 2},
		{Cluster{Nodes: 2, RanksPerNode: 1, HostCores: 2}, 2, 1, 1},
		{Cluster{Nodes: 2, RanksPerNode: 8, CoresPerNode: 4}, 16, 8, 2},
		{Cluster{Nodes: 2, RanksPerNode: 8, CoresPerNode: 4}, 2, 2, 1}, // P = 2 fits one node's cores
		{Cluster{Nodes: 2, RanksPerNode: 8}, 16, 8, 1},                 // a core a rank
	} {
		if got := tc.cl.ShareAt(tc.p, tc.rpn); got != tc.want {
			t.Errorf("%+v at P = %d, %d a node: share %g, want %g", tc.cl, tc.p, tc.rpn, got, tc.want)
		}
	}
	if got := (Cluster{Nodes: 4, RanksPerNode: 2, HostCores: 2}).Share(); got != 4 {
		t.Errorf("full cluster: share %g, want 4", got)
	}
	if err := (Cluster{Nodes: 2, RanksPerNode: 2, CoresPerNode: 2, HostCores: 2, LinkGBs: 1}).Check(); err == nil {
		t.Error("--cores-per-node with --host-cores accepted")
	}

	// Predict multiplies each row's compute by its own share: P = 1 of a
	// cluster of 8-rank nodes on 4 cores computes alone.
	g, m := defaultModel(t)
	rates := Rates{SpMMGflops: 1, GEMMGflops: 10}
	for _, p := range []int{1, 4} {
		part, err := Contiguous(g, p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Count(g, part, 8)
		if err != nil {
			t.Fatal(err)
		}
		alone := Predict(c, m, Cluster{Nodes: 2, RanksPerNode: 8, LinkGBs: 1}, rates).Compute
		host := Predict(c, m, Cluster{Nodes: 2, RanksPerNode: 8, HostCores: 2, LinkGBs: 1}, rates).Compute
		if want := alone * max(1, float64(p)/2); math.Abs(host-want) > 1e-9*want {
			t.Errorf("P = %d on a 2-core host: compute %g ms, want %g (alone %g × %d/2)", p, host, want, alone, p)
		}
	}
}

// defaultModel is the generated graph and train's default model on it.
func defaultModel(t *testing.T) (Graph, Model) {
	t.Helper()
	ds := generated(t)
	cfg := train.Defaults()
	flows, err := cfg.Flows(ds.Features.Cols, ds.Classes)
	if err != nil {
		t.Fatal(err)
	}
	return GraphOf(ds), Model{Dims: []int{ds.Features.Cols, cfg.Model.Hidden, ds.Classes}, Flows: flows}
}

// An exchange hides only behind the product with the rank's own block:
// slower GEMMs lengthen the compute, not the part of it that the rows in
// flight can overlap, so the exposed communication stays as it was.
func TestExchangeHidesBehindOwnBlockOnly(t *testing.T) {
	g, m := defaultModel(t)
	part, err := Contiguous(g, 2)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Count(g, part, 1)
	if err != nil {
		t.Fatal(err)
	}
	cl := Cluster{Nodes: 2, RanksPerNode: 1, LinkGBs: 0.001} // a slow link: the exchange outlasts any product
	fast := Predict(c, m, cl, Rates{SpMMGflops: 1, GEMMGflops: 10})
	slow := Predict(c, m, cl, Rates{SpMMGflops: 1, GEMMGflops: 0.01})
	if !(slow.Compute > 100*fast.Compute) || math.Abs(slow.Exposed-fast.Exposed) > 1e-9*fast.Exposed || !(fast.Exposed > 0) {
		t.Errorf("GEMMs 1000× slower: compute %.3f → %.3f ms, exposed %.3f → %.3f ms (want it unchanged)", fast.Compute, slow.Compute, fast.Exposed, slow.Exposed)
	}
	w := m.WorkOf(c.Ranks[0])
	if !(w.OwnSpMM > 0 && w.OwnSpMM < w.SpMM) {
		t.Errorf("own-block flops %g of %g sparse", w.OwnSpMM, w.SpMM)
	}
}

// Where a rank's peer blocks are shallow enough to be merged into runs
// (train.MergeRuns), the rows counted as passed are each run's rows with
// entries, not each block's, for every row set (the view's, the training
// columns', the training rows'): at P = 8 on the generated graph (about
// 1.5 nonzeros a row a block), counted against the runs formed block by
// block here.
func TestCountsMergedRunRows(t *testing.T) {
	ds := generated(t)
	g := GraphOf(ds)
	const p = 8
	off := make([]int64, p+1)
	for k := range off {
		off[k] = int64(k * g.Adj.Rows / p)
	}
	part := FromOffsets(off)
	c, err := Count(g, part, 0)
	if err != nil {
		t.Fatal(err)
	}
	// in says whether entry (v, u), row v and column u, is in a set's blocks.
	sets := []struct {
		set train.RowSet
		in  func(v, u int32) bool
	}{
		{train.ViewRows, func(v, u int32) bool { return true }},
		{train.TrainingRows, func(v, u int32) bool { return g.Train[u] }},
		{train.ReadByTraining, func(v, u int32) bool { return g.Train[v] }},
	}
	merged := 0
	for _, st := range sets {
		for i := range p {
			// Root j's rows with entries in rank i's block row, and its nonzeros.
			rows := make([]map[int]bool, p)
			var nnz int64
			any := map[int]bool{}
			for v := range g.Adj.Rows {
				if int(part.Parts[v]) != i {
					continue
				}
				for q := g.Adj.RowPtr[v]; q < g.Adj.RowPtr[v+1]; q++ {
					u := g.Adj.ColIdx[q]
					if j := int(part.Parts[u]); j != i && st.in(int32(v), u) {
						if rows[j] == nil {
							rows[j] = map[int]bool{}
						}
						rows[j][v], any[v] = true, true
						nnz++
					}
				}
			}
			if got := c.Ranks[i].RowsWithPeers; st.set == train.ViewRows && got != int64(len(any)) {
				t.Errorf("rank %d: %d rows with a peer's entries counted, %d found", i, got, len(any))
			}
			runs := train.MergeRuns(nnz, int64(len(any)), p-1)
			union := make([]map[int]bool, runs)
			for k := range p - 1 {
				j := k
				if k >= i {
					j++
				}
				r := train.RunOf(k, p-1, runs)
				if union[r] == nil {
					union[r] = map[int]bool{}
				}
				for v := range rows[j] {
					union[r][v] = true
				}
			}
			var want int64
			for _, u := range union {
				want += int64(len(u))
			}
			if runs < p-1 {
				merged++
			}
			if got := c.Ranks[i].Sets[st.set].PeerRows; got != want {
				t.Errorf("%v, rank %d, %d runs: %d rows passed counted, %d formed", st.set, i, runs, got, want)
			}
		}
	}
	if merged < 2*p {
		t.Fatalf("the blocks of %d rank and row set pairs were merged, fewer than two sets' worth: the test shows little", merged)
	}
}

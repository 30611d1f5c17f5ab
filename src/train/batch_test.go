package train

import (
	"sancus/src/model"
	"sancus/src/result"

	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"sancus/kernels/matrix"
	"sancus/src/graph"
	"sancus/src/partition"
	"sancus/src/prepare"
)

// clustersOf cuts a dataset's nodes into k clusters: runs of consecutive
// ids (the generated graphs' communities are not contiguous, so batches
// cut many edges, which the tests want).
func clustersOf(n, k int) []int32 {
	c := make([]int32, n)
	for v := range c {
		c[v] = int32(v * k / n)
	}
	return c
}

func sameCurve(t *testing.T, what string, got, want *result.Result, tol float64) {
	t.Helper()
	if len(got.Curve) != len(want.Curve) {
		t.Fatalf("%s: %d epochs, want %d", what, len(got.Curve), len(want.Curve))
	}
	for i, r := range got.Curve {
		w := want.Curve[i]
		if math.Abs(r.Loss-w.Loss) > tol*w.Loss {
			t.Fatalf("%s epoch %d: loss %.8f, want %.8f", what, r.Epoch, r.Loss, w.Loss)
		}
	}
}

// One batch holding every cluster is global-batch training: the same
// losses to 1e-5, for every model, at P = 1, 2 and 4.
func TestOneBatchOfEveryClusterIsGlobalBatch(t *testing.T) {
	ds, _ := generated(t)
	const k = 8
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		cfg := Defaults()
		cfg.Optim.Epochs, cfg.Model.Arch, cfg.Model.Precompute, cfg.Model.Heads, cfg.Model.Hidden = 12, arch, false, 2, 8
		global, err := RunInProcess(ds, 1, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Batch.Mode, cfg.Batch.ClustersPerStep = BatchClusters, k
		for _, p := range []int{1, 2, 4} {
			cfg.Batch.Boundary = p == 2 // with every cluster in the batch, no node is outside it
			out, err := RunClustered(ds, clustersOf(ds.N, k), k, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			sameCurve(t, fmt.Sprintf("%s P=%d boundary=%v", arch, p, cfg.Batch.Boundary), out.Result, global.Result, 1e-5)
		}
	}
}

// A scripted sequence of batches trains alike at P = 1, 2 and 4, for every
// model, with a quantized wire and with staleness that every root follows
// alike (a per-root bound depends on how rows are split); and batches really
// are smaller: an epoch of 3 steps sends less than 3 global epochs.
func TestScriptedBatchesDoNotDependOnP(t *testing.T) {
	ds, _ := generated(t)
	const k = 12
	script := func(epoch int) [][]int {
		r := epoch % 3
		return [][]int{{r, 3 + r, 6 + r, 9}, {(r + 1) % 3, 4, 7, 10}, {(r + 2) % 3, 5, 8, 11}}
	}
	for _, c := range []struct {
		model        model.Arch
		wire, policy string
		boundary     bool
	}{{model.ArchGCN, "fp32", "none", false}, {model.ArchSAGE, "int4", "none", false}, {model.ArchGAT, "fp32", "epoch-fixed", false}, {model.ArchGCN, "int8", "epoch-fixed", false},
		{model.ArchGCN, "int8", "none", true}, {model.ArchSAGE, "fp32", "none", true}, {model.ArchGAT, "fp32", "none", true}} {
		cfg := Defaults()
		cfg.Batch.Boundary = c.boundary
		cfg.Optim.Epochs, cfg.Model.Arch, cfg.Model.Precompute, cfg.Model.Heads, cfg.Model.Hidden, cfg.Wire.Fwd = 8, c.model, false, 2, 8, format(c.wire)
		cfg.Staleness.Policy, cfg.Staleness.Eps = kind(c.policy), map[string]float64{"none": 0, "epoch-fixed": 1}[c.policy]
		cfg.Batch.Mode, cfg.Batch.ClustersPerStep, cfg.Batch.Script = BatchClusters, 4, script
		var ref *result.Result
		for _, p := range []int{1, 2, 4} {
			out, err := RunClustered(ds, clustersOf(ds.N, k), k, p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if ref == nil {
				ref = out.Result
				continue
			}
			sameCurve(t, fmt.Sprintf("%+v P=%d", c, p), out.Result, ref, 1e-5)
			if c.model == model.ArchGCN && c.wire == "fp32" && !c.boundary && p == 4 {
				cfg.Batch.Mode = BatchGlobal
				global, err := RunClustered(ds, clustersOf(ds.N, k), k, p, cfg)
				if err != nil {
					t.Fatal(err)
				}
				b, g := out.Result.PerRank[0].BytesSent, global.Result.PerRank[0].BytesSent
				t.Logf("P=4 rank 0: %d bytes in batches of a third, %d global", b, g)
				if b >= 3*g/2 { // 3 steps of about a third of the rows each
					t.Errorf("cluster batches sent %d bytes, global-batch %d: the batch's rows alone should travel", b, g)
				}
				cfg.Batch.Mode = BatchClusters
			}
		}
	}
}

// The batch adjacency every rank multiplies is the subgraph the batch
// induces, renormalized (D_B^-1/2 (A_B + I) D_B^-1/2), built here from the
// whole graph.
func TestBatchAdjacencyIsTheInducedSubgraph(t *testing.T) {
	ds, _ := generated(t)
	const k = 6
	clusters := clustersOf(ds.N, k)
	batch := []int{1, 4, 5}
	in := make([]bool, ds.N)
	for v, c := range clusters {
		in[v] = c == 1 || c == 4 || c == 5
	}
	want := map[[2]int64]float64{}
	deg := make([]float64, ds.N)
	for v := range ds.N {
		if !in[v] {
			continue
		}
		deg[v] = 1
		for p := ds.Adj.RowPtr[v]; p < ds.Adj.RowPtr[v+1]; p++ {
			if u := ds.Adj.ColIdx[p]; int(u) != v && in[u] {
				deg[v]++
			}
		}
	}
	for v := range ds.N {
		if !in[v] {
			continue
		}
		want[[2]int64{int64(v), int64(v)}] = 1 / deg[v]
		for p := ds.Adj.RowPtr[v]; p < ds.Adj.RowPtr[v+1]; p++ {
			if u := int(ds.Adj.ColIdx[p]); u != v && in[u] {
				want[[2]int64{int64(v), int64(u)}] = 1 / math.Sqrt(deg[v]*deg[u])
			}
		}
	}
	for _, p := range []int{1, 3} {
		cfg := Defaults()
		cfg.Model.Precompute, cfg.Batch.Mode, cfg.Batch.ClustersPerStep = false, BatchClusters, 3
		assign, err := prepare.ClusterRanks(clusters, k, p)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		got := map[[2]int64]float64{}
		onRanksWith(t, ds, p, cfg, prepare.Options{Parts: assign, Clusters: clusters, NumClusters: k}, func(e *Engine) error {
			if err := e.enterBatch(batch); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for j, b := range e.batch.fwd {
				for r := range b.Rows {
					for q := b.RowPtr[r]; q < b.RowPtr[r+1]; q++ {
						got[[2]int64{e.ownID(r), e.srcID(j, int(b.ColIdx[q]))}] = float64(b.Val[q])
					}
				}
			}
			return nil
		})
		sameEntries(t, fmt.Sprintf("P=%d", p), got, want)
	}
	// With --boundary the batch's rows keep all their neighbours and the
	// whole graph's values forward, the induced part of them backward.
	ahat := graph.Normalize(ds.Adj)
	full, induced := map[[2]int64]float64{}, map[[2]int64]float64{}
	for v := range ds.N {
		for p := ahat.RowPtr[v]; in[v] && p < ahat.RowPtr[v+1]; p++ {
			u := int(ahat.ColIdx[p])
			full[[2]int64{int64(v), int64(u)}] = float64(ahat.Val[p])
			if in[u] {
				induced[[2]int64{int64(v), int64(u)}] = float64(ahat.Val[p])
			}
		}
	}
	cfg := Defaults()
	cfg.Model.Precompute, cfg.Batch.Mode, cfg.Batch.ClustersPerStep, cfg.Batch.Boundary = false, BatchClusters, 3, true
	assign, _ := prepare.ClusterRanks(clusters, k, 2)
	var mu sync.Mutex
	fwd, bwd := map[[2]int64]float64{}, map[[2]int64]float64{}
	onRanksWith(t, ds, 2, cfg, prepare.Options{Parts: assign, Clusters: clusters, NumClusters: k}, func(e *Engine) error {
		if err := e.enterBatch(batch); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for j := range e.batch.fwd {
			for m, blocks := range map[*map[[2]int64]float64][]*matrix.CSR{&fwd: e.batch.fwd, &bwd: e.batch.grad} {
				b := blocks[j]
				for r := range b.Rows {
					for q := b.RowPtr[r]; q < b.RowPtr[r+1]; q++ {
						(*m)[[2]int64{e.ownID(r), e.srcID(j, int(b.ColIdx[q]))}] = float64(b.Val[q])
					}
				}
			}
		}
		return nil
	})
	sameEntries(t, "boundary forward", fwd, full)
	sameEntries(t, "boundary backward", bwd, induced)
}

func sameEntries(t *testing.T, what string, got, want map[[2]int64]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d nonzeros in the batch adjacency, want %d", what, len(got), len(want))
	}
	for e, v := range want {
		if g, ok := got[e]; !ok || math.Abs(g-v) > 1e-6*v {
			t.Fatalf("%s: entry %v is %g (present %v), want %g", what, e, g, ok, v)
		}
	}
}

// On Cora, cluster-batch training (50 GREM clusters, 10 per step) stays
// within 2 points of global-batch (5 seeds each, P = 2).
func TestClusterBatchAccuracyOnCora(t *testing.T) {
	sweep(t)
	ds := loadCora(t)
	s, err := graph.OpenEdgeStream(filepath.Join(testdata, "cora"))
	if err != nil {
		t.Fatal(err)
	}
	const k = 50
	clusters, err := partition.Run("grem", s, k, partition.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Defaults()
	global, _ := meanTestAcc(t, ds, 2, cfg, 5)
	cfg.Batch.Mode, cfg.Batch.ClustersPerStep = BatchClusters, 10
	var acc float64
	for seed := 1; seed <= 5; seed++ {
		cfg.Optim.Seed = uint64(seed)
		out, err := RunClustered(ds, clusters, k, 2, cfg)
		if err != nil {
			t.Fatal(err)
		}
		acc += out.Result.TestAtBest / 5
	}
	t.Logf("cora: cluster-batch %.4f, global-batch %.4f", acc, global)
	if acc < global-0.02 {
		t.Errorf("cora cluster-batch: mean test accuracy %.4f, more than 2 points below global-batch's %.4f", acc, global)
	}
}

// A batch without training nodes changes nothing: no update is made (Adam
// would otherwise keep moving the weights on a zero gradient).
func TestBatchWithoutTrainingNodesSkipsTheStep(t *testing.T) {
	ds, _ := generated(t)
	train := make([]bool, ds.N)
	for _, v := range ds.Train {
		train[v] = true
	}
	clusters := make([]int32, ds.N) // cluster 1: nodes outside the training set
	for v := range clusters {
		if !train[v] && v%3 == 0 {
			clusters[v] = 1
		}
	}
	cfg := Defaults()
	cfg.Optim.Epochs, cfg.Model.Precompute, cfg.Batch.Mode, cfg.Batch.ClustersPerStep = 3, false, BatchClusters, 1
	cfg.Batch.Script = func(int) [][]int { return [][]int{{1}} }
	out, err := RunClustered(ds, clusters, 2, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Optim.Epochs = 1
	cfg.Batch.Script = func(int) [][]int { return [][]int{} }
	start, err := RunClustered(ds, clusters, 2, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range out.Params {
		for k, v := range p {
			if v != start.Params[i][k] {
				t.Fatalf("tensor %d[%d] moved from %g to %g with no training node in any batch", i, k, start.Params[i][k], v)
			}
		}
	}
}

package train

import (
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"sancus/kernels"
	"sancus/src/graph"
	"sancus/src/model"
	"sancus/src/partition"
)

// TestEquivalences holds the rules of the route (route.go) and of the
// exchange as pairs of runs that must train alike: the same loss every
// epoch (to a relative tolerance; 0 means bit for bit), the same
// validation and test accuracy, the same broadcasts, and, where a row says
// so, no more bytes one way than the other. A row names the rule it holds;
// the in-process = MPI rule is src/cmd/sancus's TestMPIRunsMatchSingleRank
// and TestModelsUnderMPIMatchSingleRank, where mpirun is.
func TestEquivalences(t *testing.T) {
	var rows []equivalence
	for _, build := range []func() []equivalence{
		ranksRows, precomputeRows, sparseRows, chunkRows, wholeBlockRows, reorderRows, restrictedRows, quantizedRows, cacheBitsRows,
		requiredOnlyRows, mergedRows,
	} {
		rows = append(rows, build()...)
	}
	runs := &runMemo{done: map[string]*memoRun{}}
	for _, q := range rows {
		t.Run(q.rule, func(t *testing.T) {
			ds, dir := q.data(t)
			ref := runs.get(t, q.ref, ds, dir, q.base)
			alt := runs.get(t, q.alt, ds, dir, q.base)
			q.compare(t, ref, alt)
		})
	}
}

// A way is one side of an equivalence: P ranks, a change to the row's
// base configuration, and how the dataset is cut (nil: contiguous ranges).
type way struct {
	name string
	p    int
	set  func(*Config)
	cut  func(t *testing.T, ds *graph.Dataset, dir string, p int) []int32
	// around runs the training; nil: as it is (whole-block tests switch a
	// package setting around it).
	around func(run func())
}

type bytesRule int

const (
	bytesFree    bytesRule = iota // not compared
	bytesEqual                    // both sides send the same bytes
	bytesAltLess                  // the alternative sends no more than the reference
)

type equivalence struct {
	rule     string
	data     func(testing.TB) (*graph.Dataset, string)
	base     func(*Config)
	ref, alt way
	tol      float64 // relative loss gap allowed; 0: bit for bit
	bytes    bytesRule
	mustSkip bool // some broadcast must be skipped, or the votes compared decided nothing
	lessSent bool // the alternative broadcasts less (a layer sends nothing), not as much
	also     func(t *testing.T, ref, alt Outcome)
}

func (q equivalence) compare(t *testing.T, ref, alt Outcome) {
	t.Helper()
	a, b := ref.Result, alt.Result
	if len(a.Curve) != len(b.Curve) {
		t.Fatalf("%s: %d epochs, %s: %d", q.ref.name, len(a.Curve), q.alt.name, len(b.Curve))
	}
	skipped := 0
	for i, w := range a.Curve {
		g := b.Curve[i]
		gap := math.Abs(g.Loss - w.Loss)
		// Sent counts broadcasts, one per root: it is compared at equal P.
		sent := g.Sent == w.Sent
		if q.lessSent {
			sent = g.Sent < w.Sent
		}
		if gap > q.tol*math.Abs(w.Loss) || g.ValAcc != w.ValAcc || g.TestAcc != w.TestAcc || (q.ref.p == q.alt.p && !sent) {
			t.Fatalf("epoch %d: %s loss %.10f val %.4f test %.4f sent %d; %s %.10f %.4f %.4f %d (relative gap %.2g, allowed %.2g)",
				w.Epoch, q.ref.name, w.Loss, w.ValAcc, w.TestAcc, w.Sent, q.alt.name, g.Loss, g.ValAcc, g.TestAcc, g.Sent, gap/math.Abs(w.Loss), q.tol)
		}
		skipped += g.Skipped
	}
	if q.mustSkip && skipped == 0 {
		t.Fatalf("%s skipped no broadcast", q.alt.name)
	}
	rb, ab := sentBytes(ref), sentBytes(alt)
	switch {
	case q.bytes == bytesEqual && rb != ab, q.bytes == bytesAltLess && ab > rb:
		t.Fatalf("%s sent %d bytes, %s %d", q.ref.name, rb, q.alt.name, ab)
	}
	if q.also != nil {
		q.also(t, ref, alt)
	}
}

// sentBytes is what every rank sent, in training and evaluation.
func sentBytes(o Outcome) int64 {
	var n int64
	for _, r := range o.Result.PerRank {
		n += r.BytesSent + r.EvalBytesSent
	}
	return n
}

// runMemo trains each distinct (dataset, way, configuration) once: the
// reference of several rows is one run.
type runMemo struct {
	mu   sync.Mutex
	done map[string]*memoRun
}

type memoRun struct {
	once sync.Once
	out  Outcome
	err  error
}

func (m *runMemo) get(t *testing.T, w way, ds *graph.Dataset, dir string, base func(*Config)) Outcome {
	t.Helper()
	cfg := Defaults()
	if base != nil {
		base(&cfg)
	}
	if w.set != nil {
		w.set(&cfg)
	}
	key := fmt.Sprintf("%s|%s|%d|%+v", dir, w.name, w.p, cfg)
	m.mu.Lock()
	r := m.done[key]
	if r == nil {
		r = &memoRun{}
		m.done[key] = r
	}
	m.mu.Unlock()
	r.once.Do(func() {
		var assign []int32
		if w.cut != nil {
			assign = w.cut(t, ds, dir, w.p)
		}
		run := func() { r.out, r.err = RunPartitioned(ds, assign, w.p, cfg) }
		if w.around != nil {
			w.around(run)
		} else {
			run()
		}
	})
	if r.err != nil {
		t.Fatalf("%s: %v", w.name, r.err)
	}
	return r.out
}

func onP(p int) way { return way{name: fmt.Sprintf("P=%d", p), p: p} }

// Distributed = single-rank: every model, 2 and 3 layers (3: the middle
// layer aggregates first; SAGE and GAT residual), multi-label, and a
// power-law graph with parts balanced by nonzeros.
func ranksRows() []equivalence {
	var rows []equivalence
	for _, run := range []struct {
		arch model.Arch
		pre  bool
	}{{model.ArchGCN, true}, {model.ArchGCN, false}, {model.ArchSAGE, true}, {model.ArchSAGE, false}, {model.ArchGAT, false}} {
		for _, layers := range []int{2, 3} {
			run, layers := run, layers
			base := func(c *Config) {
				c.Optim.Epochs, c.Model.Precompute, c.Model.Layers, c.Model.Arch = 25, run.pre, layers, run.arch
				c.Model.Residual = layers == 3 && run.arch != model.ArchGCN
				if layers == 3 {
					c.Model.Hidden = 6
				}
				if run.arch == model.ArchGAT {
					c.Model.Heads, c.Model.OutHeads, c.Model.Hidden = 2, 2, 4
				}
			}
			for _, p := range []int{2, 4} {
				rows = append(rows, equivalence{rule: fmt.Sprintf("P=%d equals P=1/%s precompute=%v layers=%d", p, run.arch, run.pre, layers),
					data: generated, base: base, ref: onP(1), alt: onP(p), tol: 1e-5})
			}
		}
	}
	rows = append(rows, equivalence{rule: "P=4 equals P=1/multi-label",
		data: func(t testing.TB) (*graph.Dataset, string) { return generatedMulti(t), "multi" },
		base: func(c *Config) { c.Optim.Epochs, c.Optim.LR, c.Model.Dropout = 60, 0.05, 0 },
		ref:  onP(1), alt: onP(4), tol: 1e-5,
		also: func(t *testing.T, ref, _ Outcome) {
			if r := ref.Result; r.Metric != "micro-f1" || r.TestAtBest < 0.5 {
				t.Fatalf("metric %q, test micro-F1 %.4f", r.Metric, r.TestAtBest)
			}
		}})
	balanced := func(t *testing.T, ds *graph.Dataset, dir string, p int) []int32 {
		s, err := graph.OpenEdgeStream(dir)
		if err != nil {
			t.Fatal(err)
		}
		parts := partition.Random(ds.N, p, 1)
		if _, _, err := partition.BalanceNonzeros(s, parts, p, partition.BalanceNNZ, 0.03, 1.05); err != nil {
			t.Fatal(err)
		}
		return parts
	}
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		arch := arch
		for _, p := range []int{2, 4} {
			rows = append(rows, equivalence{rule: fmt.Sprintf("P=%d equals P=1/power-law %s balanced by nonzeros", p, arch),
				data: powerLaw,
				base: func(c *Config) {
					c.Optim.Epochs, c.Model.Arch, c.Model.Precompute, c.Model.Hidden, c.Model.Heads = 10, arch, false, 8, 2
				},
				ref: way{name: "P=1", p: 1, cut: balanced}, alt: way{name: fmt.Sprintf("P=%d", p), p: p, cut: balanced}, tol: 1e-5})
		}
	}
	return rows
}

var powerGraph testGraph

// powerLaw is a small dcsbm graph: degrees from 2 to 400 (γ 2.1).
func powerLaw(t testing.TB) (*graph.Dataset, string) {
	return powerGraph.get(t, graph.GenConfig{Model: "dcsbm", Nodes: 1500, Features: 24, FeatureNNZ: 4, Classes: 5, FeatureSig: 0.5,
		TrainFrac: 0.2, ValFrac: 0.1, Seed: 6, Exponent: 2.1, MinDegree: 2, MaxDegree: 400, Homophily: 0.7})
}

// Sparse rows = dense broadcasts: only the rows a rank reads travel, and
// what it trains is unchanged under every staleness policy.
// The precomputed product = the plain path: without dropout, layer 1 on
// ÂX (GCN) or D⁻¹AX (GraphSAGE) trains what aggregating X every epoch
// trains, summed in another order, and sends less.
func precomputeRows() []equivalence {
	var rows []equivalence
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE} {
		for _, p := range []int{1, 3} {
			rows = append(rows, equivalence{rule: fmt.Sprintf("precomputed product equals plain/%s P=%d", arch, p), data: generated,
				base: func(c *Config) { c.Optim.Epochs, c.Model.Arch, c.Model.Dropout = 20, arch, 0 },
				ref:  way{name: "plain", p: p, set: func(c *Config) { c.Model.Precompute = false }},
				alt:  way{name: "precomputed", p: p}, tol: 1e-5, bytes: bytesAltLess, lessSent: true})
		}
	}
	return rows
}

func sparseRows() []equivalence {
	var rows []equivalence
	for _, pol := range []struct {
		name string
		eps  float64
	}{{"none", 0}, {"epoch-fixed", 1}, {"variation-gap", 0.03}} {
		pol := pol
		for _, p := range []int{2, 4} {
			rows = append(rows, equivalence{rule: fmt.Sprintf("sparse rows equal dense broadcasts/%s P=%d", pol.name, p),
				data: generated,
				base: func(c *Config) { c.Optim.Epochs, c.Staleness.Policy, c.Staleness.Eps = 20, kind(pol.name), pol.eps },
				ref:  way{name: "dense", p: p, set: func(c *Config) { c.Exchange.Dense = true }},
				alt:  way{name: "sparse", p: p}, tol: 1e-5, bytes: bytesAltLess})
		}
	}
	// GAT: with the sparse exchange its backward reduces each peer's sums
	// (reduce.go), where dense broadcasts send its gradient rows; a stale
	// forward block (epoch-fixed) is the copy both differentiate.
	for _, pol := range []string{"none", "epoch-fixed"} {
		for _, p := range []int{2, 4} {
			rows = append(rows, equivalence{rule: fmt.Sprintf("reduced GAT gradients equal broadcast ones/%s P=%d", pol, p),
				data: generated,
				base: func(c *Config) {
					c.Optim.Epochs, c.Staleness.Policy, c.Staleness.Eps, c.Model.Arch = 12, kind(pol), 3, model.ArchGAT
					c.Model.Heads, c.Model.Hidden = 2, 4
				},
				ref: way{name: "dense", p: p, set: func(c *Config) { c.Exchange.Dense = true }},
				alt: way{name: "sparse", p: p}, tol: 1e-5, bytes: bytesAltLess, mustSkip: pol != "none"})
		}
	}
	return rows
}

// Chunked = whole messages: rows sent a few at a time, through two
// buffers per peer in turn, train bit for bit what whole messages train.
func chunkRows() []equivalence {
	var rows []equivalence
	for _, run := range []struct{ name, staleness, wire string }{
		{"none", "none", "fp32"}, {"variation-gap", "variation-gap", "fp32"}, {"int8", "none", "int8"}} {
		run := run
		rows = append(rows, equivalence{rule: "chunked sends equal whole/" + run.name, data: generated,
			base: func(c *Config) {
				c.Optim.Epochs, c.Staleness.Policy, c.Wire.Fwd, c.Run.EvalEvery = 8, kind(run.staleness), format(run.wire), 2
			},
			ref: onP(3), alt: way{name: "chunked", p: 3, set: func(c *Config) { c.Exchange.SparseChunk = 200 }},
			bytes: bytesEqual})
	}
	return rows
}

// Whole blocks = packed rows: where a rank reads every row of a root, the
// root sends its block whole, straight from its rows (or layer 1's dropped
// copy): on a dense graph (degree 50, 90% training rows) nearly every
// send goes whole, and 16 classes make the last layer aggregate first, so
// its rows travel dropped.
func wholeBlockRows() []equivalence {
	always := func(run func()) {
		defer func(s int) { wholeBlockShare = s }(wholeBlockShare)
		wholeBlockShare = 0
		run()
	}
	never := func(run func()) {
		defer func(s int) { wholeBlockShare = s }(wholeBlockShare)
		wholeBlockShare = 101
		run()
	}
	var rows []equivalence
	for _, run := range []struct {
		name, staleness, wire string
		full                  bool
	}{{"none", "none", "fp32", false}, {"full-output", "none", "fp32", true}, {"variation-gap", "variation-gap", "fp32", false}, {"int8", "none", "int8", false}} {
		run := run
		rows = append(rows, equivalence{rule: "whole blocks equal packed rows/" + run.name, data: denseGraph,
			base: func(c *Config) {
				c.Optim.Epochs, c.Staleness.Policy, c.Wire.Fwd, c.Run.EvalEvery, c.Exchange.FullOutput = 8, kind(run.staleness), format(run.wire), 2, run.full
			},
			ref: way{name: "whole blocks", p: 3, around: always}, alt: way{name: "packed", p: 3, around: never},
			bytes: bytesAltLess})
	}
	return rows
}

var densePlanted testGraph

func denseGraph(t testing.TB) (*graph.Dataset, string) {
	return densePlanted.get(t, graph.GenConfig{Model: "planted", Nodes: 600, Edges: 15000, Features: 32, FeatureNNZ: 6,
		Classes: 16, PIn: 0.6, FeatureSig: 0.4, TrainFrac: 0.9, ValFrac: 0.05, Seed: 5})
}

// Reordered = contiguous: a partition renames the nodes part by part, and
// training is unchanged (dropout is keyed by original ids). Cora, where 20
// epochs leave no near-tie that the reordered sums could flip.
func reorderRows() []equivalence {
	var rows []equivalence
	for _, name := range []string{"random", "spring", "grem"} {
		name := name
		cut := func(t *testing.T, _ *graph.Dataset, dir string, p int) []int32 {
			s, err := graph.OpenEdgeStream(dir)
			if err != nil {
				t.Fatal(err)
			}
			assign, err := partition.Run(name, s, p, partition.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			return assign
		}
		for _, dense := range []bool{false, true} {
			dense := dense
			rows = append(rows, equivalence{rule: fmt.Sprintf("reordered equals contiguous/%s dense=%v", name, dense),
				data: coraWithDir,
				base: func(c *Config) { c.Optim.Epochs = 20 },
				ref:  onP(4),
				alt:  way{name: name, p: 4, cut: cut, set: func(c *Config) { c.Exchange.Dense = dense }},
				tol:  1e-5})
		}
	}
	return rows
}

func coraWithDir(t testing.TB) (*graph.Dataset, string) {
	return loadCora(t), filepath.Join(testdata, "cora")
}

// Restricted = full output: the last layer computed at the rows the loss
// reads (and layer 1 at the rows it reads) trains what every row computed
// trains, sending no more; dense broadcasts send the same.
func restrictedRows() []equivalence {
	var rows []equivalence
	for _, run := range []struct {
		name   string
		hidden int
		pre    bool
		vargap bool
		multi  bool
		wire   string
		dense  bool
		sage   bool
		gat    int // heads of a GAT's output layer (0: not a GAT)
	}{
		{"transform-first last layer", 16, true, false, false, "fp32", false, false, 0},
		{"aggregate-first last layer", 4, true, false, false, "fp32", false, false, 0},
		{"plain Â(XW), variation-gap", 16, false, true, false, "fp32", false, false, 0},
		{"ÂX, variation-gap", 4, true, true, false, "fp32", false, false, 0},
		{"int8 wire", 4, false, false, false, "int8", false, false, 0},
		{"multi-label", 16, true, false, true, "fp32", false, false, 0},
		{"dense broadcasts", 4, false, false, false, "fp32", true, false, 0},
		{"GraphSAGE on D⁻¹AX", 16, true, false, false, "fp32", false, true, 0},
		{"GraphSAGE plain, variation-gap", 16, false, true, false, "fp32", false, true, 0},
		{"GraphSAGE int8 wire", 16, true, false, false, "int8", false, true, 0},
		// GAT: restricted on one rank and where its neighbour sums are
		// reduced; with dense broadcasts or stale gradients (below) it keeps
		// its full products at P > 1, and those rows check that it does.
		{"GAT", 4, false, false, false, "fp32", false, false, 1},
		{"GAT two output heads", 4, false, false, false, "fp32", false, false, 2},
		{"GAT int8 wire", 4, false, false, false, "int8", false, false, 1},
		{"GAT variation-gap", 4, false, true, false, "fp32", false, false, 1},
		{"GAT dense broadcasts", 4, false, false, false, "fp32", true, false, 1},
		{"GAT multi-label", 4, false, false, true, "fp32", false, false, 1},
	} {
		run := run
		data := generated
		if run.multi {
			data = func(t testing.TB) (*graph.Dataset, string) { return generatedMulti(t), "multi" }
		}
		for _, p := range []int{1, 3} {
			q := equivalence{rule: fmt.Sprintf("restricted output equals full/%s P=%d", run.name, p), data: data,
				base: func(c *Config) {
					c.Optim.Epochs, c.Model.Hidden, c.Model.Precompute, c.Wire.Fwd, c.Exchange.Dense = 15, run.hidden, run.pre, format(run.wire), run.dense
					if run.sage {
						c.Model.Arch = model.ArchSAGE
					}
					if run.gat > 0 {
						c.Model.Arch, c.Model.Heads, c.Model.OutHeads = model.ArchGAT, 2, run.gat
					}
					if run.vargap {
						c.Staleness.Policy, c.Staleness.Eps = kind("variation-gap"), 0.3 // loose enough to skip within 15 epochs
					}
				},
				ref:      way{name: "full output", p: p, set: func(c *Config) { c.Exchange.FullOutput = true }},
				alt:      way{name: "restricted", p: p},
				tol:      1e-6,
				bytes:    bytesAltLess,
				mustSkip: run.vargap && p > 1,
			}
			if run.dense {
				q.bytes = bytesEqual
			}
			if run.sage && p > 1 { // the restriction took: fewer rows travel
				q.also = func(t *testing.T, ref, alt Outcome) {
					if r, a := sentBytes(ref), sentBytes(alt); a >= r {
						t.Fatalf("restricted GraphSAGE sent %d bytes, full output %d", a, r)
					}
				}
			}
			rows = append(rows, q)
		}
	}
	// GAT with stale gradients: at P = 1 restricted, its gradient rows
	// (those of skipped targets without a softmax) under the policy.
	for _, p := range []int{1, 3} {
		rows = append(rows, equivalence{rule: fmt.Sprintf("restricted output equals full/GAT stale gradients P=%d", p), data: generated,
			base: func(c *Config) {
				c.Optim.Epochs, c.Model.Hidden, c.Model.Precompute = 15, 4, false
				c.Model.Arch, c.Model.Heads, c.Model.OutHeads = model.ArchGAT, 2, 1
				c.Staleness.Policy, c.Staleness.Eps, c.Staleness.SkipGradients = kind("variation-gap"), 0.3, true
			},
			ref: way{name: "full output", p: p, set: func(c *Config) { c.Exchange.FullOutput = true }},
			alt: way{name: "restricted", p: p}, tol: 1e-6, bytes: bytesAltLess})
	}
	return rows
}

// Quantized runs do not depend on P or the exchange: rounding is keyed by
// node, not rank, and the owner multiplies what the others decode.
func quantizedRows() []equivalence {
	var rows []equivalence
	for _, c := range []struct {
		wire, grad, policy string
		eps                float64
		delta              bool
	}{
		{"int8", "", "none", 0, false},
		{"int4", "int8", "variation-gap", 0.05, false},
		{"int2", "int4", "epoch-fixed", 1, true},
		{"auto", "bf16", "none", 0, true},
	} {
		c := c
		base := func(cfg *Config) {
			cfg.Optim.Epochs, cfg.Wire.Fwd, cfg.Wire.Grad, cfg.Wire.Delta, cfg.Wire.Error = 15, format(c.wire), format(c.grad), c.delta, 0.1
			cfg.Staleness.Policy, cfg.Staleness.Eps = kind(c.policy), c.eps
		}
		var also func(t *testing.T, ref, _ Outcome)
		if c.policy == "none" {
			also = func(t *testing.T, ref, _ Outcome) {
				if ref.Result.Curve[len(ref.Result.Curve)-1].QuantErr == 0 {
					t.Fatal("no quantization error reported")
				}
			}
		}
		name := fmt.Sprintf("%s grad=%s %s delta=%v", c.wire, c.grad, c.policy, c.delta)
		for _, alt := range []way{onP(2), onP(4), {name: "P=4 dense", p: 4, set: func(c *Config) { c.Exchange.Dense = true }}} {
			rows = append(rows, equivalence{rule: fmt.Sprintf("quantized %s equals P=1/%s", alt.name, name), data: generated,
				base: base, ref: onP(1), alt: alt, tol: 1e-5, also: also})
		}
	}
	// With 16 classes the last layer aggregates first: its rows are
	// dropped before they are encoded, by every exchange alike.
	for _, alt := range []way{onP(2), {name: "P=4 dense", p: 4, set: func(c *Config) { c.Exchange.Dense = true }}} {
		rows = append(rows, equivalence{rule: "quantized, aggregating first, " + alt.name + " equals P=1", data: denseGraph,
			base: func(c *Config) { c.Optim.Epochs, c.Wire.Fwd, c.Run.EvalEvery = 8, format("int2"), 2 },
			ref:  onP(1), alt: alt, tol: 1e-5})
	}
	return rows
}

// Packed caches = float caches: blocks kept as they arrived (its own as
// the owner encoded it, its rows dropped as they are encoded), decoded
// where they are read, a range of rows at a time (here 37 rows, and 296
// dropped and encoded, so every block takes several), train bit for bit
// what blocks decoded on arrival train (bytes not compared: a packed
// cache holds every row of a block, and the last layer then computes
// every row): at P = 1, 2 and 3, 2 and 3 layers, the forward and the
// gradient quantized or the gradient alone, and with variation-gap,
// whose receivers drop the rows they decode.
func cacheBitsRows() []equivalence {
	small := func(run func()) {
		defer func(b, e int) { decodeRangeBytes, encodeRows = b, e }(decodeRangeBytes, encodeRows)
		decodeRangeBytes, encodeRows = 37*4*16, 296
		run()
	}
	packed := func(p int) way {
		return way{name: "--cache-bits", p: p, set: func(c *Config) { c.Wire.CacheBits = true }, around: small}
	}
	var rows []equivalence
	for _, w := range []string{"int8", "int4", "int2"} {
		rows = append(rows, equivalence{rule: "packed caches equal float caches/" + w, data: generated,
			base: func(c *Config) {
				c.Optim.Epochs, c.Wire.Fwd, c.Wire.Grad, c.Run.EvalEvery = 10, format(w), format(w), 2
			},
			ref: onP(3), alt: packed(3)})
	}
	for _, layers := range []int{2, 3} {
		for _, p := range []int{1, 2, 3} {
			for _, v := range []struct{ name, fwd, grad, staleness string }{
				{"int2", "int2", "int2", "none"}, {"gradient int2", "fp32", "int2", "none"}, {"int4 variation-gap", "int4", "int4", "variation-gap"},
			} {
				if v.staleness != "none" && p == 1 {
					continue // no peer to skip
				}
				rows = append(rows, equivalence{rule: fmt.Sprintf("packed caches equal float caches/%s P=%d %d layers", v.name, p, layers), data: generated,
					base: func(c *Config) {
						c.Optim.Epochs, c.Model.Layers, c.Run.EvalEvery = 6, layers, 2
						c.Wire.Fwd, c.Wire.Grad, c.Staleness.Policy = format(v.fwd), format(v.grad), kind(v.staleness)
					},
					ref: onP(p), alt: packed(p)})
			}
		}
	}
	return rows
}

// requiredOnly is a backend with the required operations alone: every
// optional one (row lists, fused passes, element operations, ELU, GAT's
// attention, and its layer-1 operand's rows and sums) hidden, so the
// engine takes the path it has for a backend without them (host copies,
// whole rows, a sum of its own).
type requiredOnly struct{ kernels.Backend }

func (r requiredOnly) Input(o *kernels.Operand) (kernels.Input, error) {
	in, err := r.Backend.Input(o)
	return struct{ kernels.Input }{in}, err
}

func requiredOnlyRows() []equivalence {
	var rows []equivalence
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		rows = append(rows, equivalence{rule: fmt.Sprintf("required operations alone equal the CPU's/%s", arch), data: generated,
			base: func(c *Config) {
				c.Optim.Epochs, c.Model.Arch = 10, arch
				if arch == model.ArchGAT {
					c.Model.Heads, c.Model.OutHeads, c.Model.Hidden = 2, 2, 4
				}
			},
			ref: onP(2), alt: way{name: "required operations alone", p: 2, set: func(c *Config) { c.Run.Backend = requiredOnly{kernels.CPU{}} }},
			tol: 1e-6, bytes: bytesEqual})
	}
	return rows
}

// Merged runs = block by block: where peer blocks are shallow (P = 4 and
// 8 on the generated graph, about 3 and 1.5 nonzeros a row a block),
// runs of them multiplied as one product sum every row as the blocks one
// by one do, bit for bit: stale copies, the int8 wire, the ring,
// dropout drawn by the receivers, GraphSAGE and the restricted last
// layer's blocks included. The runs' blocks are Â's entries again, so
// the graph component grows: the runs were made.
func mergedRows() []equivalence {
	var rows []equivalence
	for _, v := range []struct {
		name string
		set  func(c *Config)
	}{
		{"gcn", func(c *Config) {}},
		{"epoch-fixed", func(c *Config) { c.Staleness.Policy, c.Staleness.Eps = kind("epoch-fixed"), 3 }},
		{"int8", func(c *Config) { c.Wire.Fwd = format("int8") }},
		{"ring", func(c *Config) { c.Exchange.Dense = true }},
		{"dropout drawn by receivers", func(c *Config) { // (3 layers: a mask reaches aggregate)
			c.Model.Layers, c.Model.Dropout, c.Staleness.Policy, c.Staleness.Eps = 3, 0.5, kind("epoch-fixed"), 2
		}},
		{"sage", func(c *Config) { c.Model.Arch = model.ArchSAGE }},
		{"full output", func(c *Config) { c.Exchange.FullOutput = true }},
		{"profiled", func(c *Config) { c.Run.ProfileKernels = true }},
	} {
		for _, p := range []int{4, 8} {
			rows = append(rows, equivalence{rule: fmt.Sprintf("merged runs equal block by block/%s P=%d", v.name, p), data: generated,
				base: func(c *Config) { c.Optim.Epochs, c.Run.EvalEvery = 6, 2; v.set(c) },
				ref:  way{name: "block by block", p: p, set: func(c *Config) { c.Exchange.BlockByBlock = true }},
				alt:  way{name: "merged", p: p}, bytes: bytesEqual,
				also: func(t *testing.T, ref, alt Outcome) {
					for i, r := range ref.Result.PerRank {
						if a := alt.Result.PerRank[i].Memory.GraphMB; a <= r.Memory.GraphMB {
							t.Fatalf("rank %d: graph %.3f MB merged, %.3f block by block: no run was merged", i, a, r.Memory.GraphMB)
						}
					}
				}})
		}
	}
	return rows
}

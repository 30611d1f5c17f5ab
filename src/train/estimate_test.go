package train

import (
	"fmt"
	"math"
	"testing"

	"sancus/collectives/wire"
	"sancus/src/model"
	"sancus/src/prepare"
	"sancus/src/result"
	"sancus/src/shard"
)

// TestEstimateMatchesEngine: the estimate fitsMemory makes before the
// layers are built agrees, component by component, with what the built
// engine holds after training, for every model on one and two ranks, with
// float32 rows and rows kept packed (--cache-bits), the gradients too.
func TestEstimateMatchesEngine(t *testing.T) {
	ds, _ := generated(t)
	type variant struct {
		name string
		set  func(*Config)
	}
	variants := []variant{
		{"fp32", func(*Config) {}},
		{"cache-bits int8", func(c *Config) { c.Wire.Fwd, c.Wire.CacheBits = wire.Format(8), true }},
		{"3 layers", func(c *Config) { c.Model.Layers = 3 }},
		{"cache-bits int2 3 layers", func(c *Config) {
			c.Wire.Fwd, c.Wire.Grad, c.Wire.CacheBits, c.Model.Layers = wire.Format(2), wire.Format(2), true, 3
		}},
	}
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		for _, hidden := range []int{4, 16, 64} { // 4: layer 2 aggregates first (7 classes)
			for _, p := range []int{1, 2, 3} {
				for _, v := range variants {
					name := fmt.Sprintf("%v-%d P=%d %s", arch, hidden, p, v.name)
					cfg := Defaults()
					cfg.Model.Arch, cfg.Model.Hidden, cfg.Optim.Epochs = arch, hidden, 2
					if arch == model.ArchGAT {
						cfg.Model.Heads = 2
					}
					v.set(&cfg)
					out, err := runPrepared(ds, p, cfg, prepare.Options{Precompute: cfg.Precomputed()})
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					for _, r := range out.Result.PerRank {
						checkEstimate(t, name, r)
					}
				}
			}
		}
	}
}

// TestEvalSlotsShared: evaluation's layers, sharing one buffer of slots,
// evaluate as they do with slots of their own, bit for bit, in less
// memory: GCN's layers of two widths, GAT's and GraphSAGE's, sparse and
// ring exchanges.
func TestEvalSlotsShared(t *testing.T) {
	ds, _ := generated(t)
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		for _, dense := range []bool{false, true} {
			cfg := Defaults()
			cfg.Model.Arch, cfg.Model.Layers, cfg.Model.Hidden, cfg.Optim.Epochs, cfg.Exchange.Dense = arch, 3, 16, 3, dense
			run := func(lend bool) Outcome {
				defer func(was bool) { lendEval = was }(lendEval)
				lendEval = lend
				out, err := runPrepared(ds, 2, cfg, prepare.Options{Precompute: cfg.Precomputed()})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			own, shared := run(false), run(true)
			name := fmt.Sprintf("%v dense=%v", arch, dense)
			for i, a := range own.Result.Curve {
				b := shared.Result.Curve[i]
				if a.Loss != b.Loss || a.ValLoss != b.ValLoss || a.ValAcc != b.ValAcc || a.TestAcc != b.TestAcc {
					t.Errorf("%s epoch %d: slots of its own %+v, shared %+v", name, a.Epoch, a, b)
				}
			}
			for r, x := range shared.Result.PerRank {
				if y := own.Result.PerRank[r]; x.Memory.EvalMB >= y.Memory.EvalMB {
					t.Errorf("%s rank %d: evaluation holds %.4f MB shared, %.4f MB apart", name, r, x.Memory.EvalMB, y.Memory.EvalMB)
				}
			}
		}
	}
}

func checkEstimate(t *testing.T, name string, r result.RankStats) {
	t.Helper()
	m, x := r.Memory, r.Memory.Estimate
	parts := []struct {
		what          string
		measured, est float64
	}{
		{"graph", m.GraphMB, x.GraphMB}, {"own", m.OwnMB, x.OwnMB}, {"activations", m.ActivationsMB, x.ActivationsMB},
		{"caches", m.CachesMB, x.CachesMB}, {"evaluation", m.EvalMB, x.EvalMB}, {"exchange", m.ExchangeMB, x.ExchangeMB}, {"model", m.ModelMB, x.ModelMB},
	}
	var sumM, sumX float64
	for _, p := range parts {
		sumM += p.measured
		sumX += p.est
	}
	// Each component within 10%, or 2% of the whole (a lazily sized
	// buffer, a reduction's encodings); the whole within 5%.
	for _, p := range parts {
		if d := math.Abs(p.est - p.measured); d > 0.1*p.measured && d > 0.02*sumM {
			t.Errorf("%s rank %d: %s estimated %.4f MB, built %.4f MB", name, r.Rank, p.what, p.est, p.measured)
		}
	}
	if math.Abs(sumX-sumM) > 0.05*sumM {
		t.Errorf("%s rank %d: estimated %.4f MB, built %.4f MB", name, r.Rank, sumX, sumM)
	}
}

// TestFootprintFromCounts: the graph and input bytes sancus plan estimates
// from a partition's counts are the shard's as the engine holds them.
func TestFootprintFromCounts(t *testing.T) {
	ds, _ := generated(t)
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE, model.ArchGAT} {
		cfg := Defaults()
		cfg.Model.Arch = arch
		for _, p := range []int{1, 2, 3} {
			prep, err := prepare.InMemory(ds, p, prepare.Options{Precompute: cfg.Precomputed()})
			if err != nil {
				t.Fatal(err)
			}
			shards, err := prep.Shards()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range shards {
				var nnz, held int64
				for _, b := range s.Blocks {
					nnz += b.NNZ()
					held += b.Bytes()
				}
				held += 4 * int64(len(s.Labels)+len(s.Train)+len(s.Val)+len(s.Test)+len(s.NodeIDs))
				if got := GraphBytes(s.Rows(), nnz, p, len(s.Train), s.NodeIDs != nil); got != held {
					t.Errorf("%v P=%d rank %d: graph %d bytes from the counts, %d held", arch, p, s.Rank, got, held)
				}
				var pnnz int64
				if a := s.Of(cfg.Precomputed()); cfg.Precomputed() != 0 && a.CSR != nil {
					pnnz = a.CSR.NNZ()
				} else if cfg.Precomputed() != 0 {
					pnnz = int64(s.Rows() * s.FeatDim)
				}
				got, _ := InputBytes(cfg, s.Rows(), s.FeatDim, s.Features.NNZ(), pnnz)
				want := inputHeld(t, cfg, s)
				if got != want {
					t.Errorf("%v P=%d rank %d: input %d bytes from the counts, %d held", arch, p, s.Rank, got, want)
				}
			}
		}
	}
}

// inputHeld is what openInput keeps of a shard's input: the precomputed
// product (dense where dense enough) and, beside or instead of it, X.
func inputHeld(t *testing.T, cfg Config, s *shard.Shard) int64 {
	t.Helper()
	var n int64
	agg := cfg.Precomputed()
	if agg != 0 {
		switch a := s.Of(agg); {
		case a.Dense != nil:
			n += 4 * int64(len(a.Dense.Data))
		case a.CSR.DenseEnough():
			n += 4 * int64(a.CSR.Rows*a.CSR.Cols)
		default:
			n += a.CSR.Bytes()
		}
	}
	if agg != shard.Sym {
		n += s.Features.Bytes()
		if s.Features.DenseEnough() {
			n += 4 * int64(s.Features.Rows*s.Features.Cols)
		}
	}
	return n
}

package train

import (
	"fmt"
	"math"
	"testing"

	"sancus/src/model"
	"sancus/src/sample"
)

// sampledConfig is cfg trained on sampled batches.
func sampledConfig(cfg Config, size int, draw sample.Draw, fanouts ...int) Config {
	cfg.Batch.Mode, cfg.Batch.Size, cfg.Batch.Draw, cfg.Batch.Fanouts = BatchSampled, size, draw, fanouts
	return cfg
}

// At fanout ≥ the largest degree, with every training vertex in one batch,
// a sampled step is a full-graph step: the same losses to 1e-5 and the
// same weights, for GCN and GraphSAGE, at P = 1 and 2, with either draw,
// and with dropout (its masks are keyed alike).
func TestFullFanoutBatchIsGlobalStep(t *testing.T) {
	ds, _ := generated(t)
	for _, arch := range []model.Arch{model.ArchGCN, model.ArchSAGE} {
		for _, dropout := range []float64{0, 0.5} {
			cfg := Defaults()
			cfg.Optim.Epochs, cfg.Model.Arch, cfg.Model.Dropout, cfg.Model.Precompute = 4, arch, dropout, dropout == 0
			global, err := RunInProcess(ds, 1, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				p    int
				draw sample.Draw
			}{{1, sample.DrawLocal}, {1, sample.DrawGlobal}, {2, sample.DrawGlobal}} {
				what := fmt.Sprintf("%v dropout %g P=%d %v", arch, dropout, c.p, c.draw)
				out, err := RunInProcess(ds, c.p, sampledConfig(cfg, ds.N, c.draw, ds.N, ds.N))
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				sameCurve(t, what, out.Result, global.Result, 1e-5)
				for i, p := range out.Params {
					for k, v := range p {
						if w := global.Params[i][k]; math.Abs(float64(v-w)) > 1e-5*(1+math.Abs(float64(w))) {
							t.Fatalf("%s: tensor %d[%d] is %g, full-graph %g", what, i, k, v, w)
						}
					}
				}
				if s := out.Result.Curve[0].Sampling; s == nil || s.Steps != 1 || s.Seeds != int64(len(ds.Train)) {
					t.Fatalf("%s: sampling figures %+v, want one step of %d seeds", what, s, len(ds.Train))
				}
			}
		}
	}
}

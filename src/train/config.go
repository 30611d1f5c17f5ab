package train

import (
	"fmt"
	"io"
	"math"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/src/model"
	"sancus/src/sample"
	"sancus/src/shard"
	"sancus/src/staleness"
)

// Config is one training run, grouped by concern. Check validates it once
// against every rule; New builds the engine from what Check parsed.
type Config struct {
	Model     ModelConfig
	Optim     OptimConfig
	Staleness StalenessConfig
	Wire      WireConfig
	Batch     BatchConfig
	Exchange  ExchangeConfig
	Run       RunConfig
}

// ModelConfig is what is trained.
type ModelConfig struct {
	// Arch is the family. GraphSAGE and GAT read X in layer 1: the ÂX
	// shortcut is a GCN's.
	Arch   model.Arch
	Layers int
	Hidden int // a GAT's: per head
	// Heads and OutHeads are a GAT's heads in the hidden layers
	// (concatenated) and in the output layer (averaged).
	Heads, OutHeads int
	// Residual adds each hidden layer's input to its output, where the
	// widths match (every layer but the first and the last).
	Residual   bool
	Dropout    float64
	AttDropout float64 // GAT: dropout of attention coefficients (< 0: as Dropout)
	// Precompute uses the shard's (ÂX)_i: exact, and layer 1 sends nothing.
	Precompute bool
}

// widths are the layers' input and output widths, from features to
// classes (a GAT's hidden width is its heads' together), and a GAT's heads
// per layer (nil for the other families).
func (m ModelConfig) widths(features, classes int) (dims, heads []int) {
	dims = []int{features}
	for l := 0; l+1 < m.Layers; l++ {
		if m.Arch.Attends() {
			dims, heads = append(dims, m.Heads*m.Hidden), append(heads, m.Heads)
		} else {
			dims = append(dims, m.Hidden)
		}
	}
	dims = append(dims, classes)
	if m.Arch.Attends() {
		heads = append(heads, m.OutHeads)
	}
	return dims, heads
}

// OptimConfig is how it is trained.
type OptimConfig struct {
	Epochs      int
	LR          float64
	WeightDecay float64 // L2 on the first layer's weights (Kipf & Welling); a GAT's on every parameter
	Seed        uint64
	// Clip scales each rank's broadcast gradient block δ_i down to norm
	// th_i = ClipScale·Clip when it is larger; 0 disables. ClipScale 0
	// means √P, as in SANCUS.
	Clip, ClipScale float64
	// MaxLossGrowth stops training as diverged when the loss exceeds this
	// many times the first epoch's (0: only non-finite values stop it).
	MaxLossGrowth float64
}

// StalenessConfig is when a root may skip its broadcast.
type StalenessConfig struct {
	Policy   staleness.Kind
	Eps      float64 // the policy's bound (epochs, or relative change); < 0: the policy's own (DefaultBound)
	MaxStale int     // hard cap on epochs of staleness for every policy
	// SkipGradients is the SkipG baseline: gradient broadcasts obey the
	// policy too.
	SkipGradients bool
	FreshDiagonal bool // use the fresh own block instead of the shared cached one
}

// WireConfig is how blocks travel (collectives/wire): forward blocks as
// Fwd (AsForward: fp32), gradient blocks as Grad (AsForward: as Fwd) —
// fp32, bf16, int8, int4, int2, or auto (the owner picks the fewest bits
// whose relative error stays under Error). FromLink lets Resolve choose
// Fwd from the measured link between ranks that share no memory. Delta
// sends a refreshed root's change against the copy every rank holds.
// CacheBits keeps received blocks packed, decoding each when used.
// Allreduce bf16 halves the weight-gradient allreduce, with error
// feedback.
type WireConfig struct {
	Fwd, Grad wire.Format
	Error     float64
	FromLink  bool `json:",omitempty"`
	Delta     bool
	CacheBits bool
	Allreduce wire.Format
}

// BatchConfig is what a step trains on: the whole graph (BatchGlobal),
// ClustersPerStep of the shards' clusters (BatchClusters, batch.go), or
// the sampled neighbourhoods of Size training vertices (BatchSampled,
// sampled.go). Script, if set, lists each epoch's steps instead of drawing
// them (tests, cluster batches).
type BatchConfig struct {
	Mode            BatchMode
	ClustersPerStep int
	Boundary        bool                    // a batch's rows also read their neighbours outside it, from the caches
	Script          func(epoch int) [][]int `json:"-"`
	// Sampled batches: neighbours kept per vertex in each layer (layer 1
	// first), the global batch's training vertices, and where each rank
	// draws its seeds from.
	Fanouts []int       `json:",omitempty"`
	Size    int         `json:",omitempty"`
	Draw    sample.Draw `json:",omitempty"`
	// Prefetch samples and fetches the next batch while this one trains
	// (ByteGNN's pipeline): the same batches, less of their time exposed.
	Prefetch bool `json:",omitempty"`
	// Migrate: with MigrateModel the model hops to the micrographs' homes
	// (HopGNN, migrate.go), Pregather fetching each iteration's rows in one
	// exchange and Merge time steps merged away (a count, or auto);
	// Prefetch does not apply.
	Migrate   Migrate `json:",omitempty"`
	Pregather bool    `json:",omitempty"`
	Merge     Merging `json:",omitempty"`
}

// ExchangeConfig is which rows move and by what means.
type ExchangeConfig struct {
	// Dense broadcasts whole blocks (SANCUS as published); by default each
	// root sends every rank only the rows its block of Â references.
	Dense     bool
	Native    bool // with Dense: MPI_Bcast instead of the ring, for comparison
	RingChunk int  // ring pipeline chunk in floats (0: default)
	// SparseChunk bounds the bytes of rows in one message of the sparse
	// exchange (0: 64 MiB): a peer's rows go in chunks, through two pack
	// buffers per peer.
	SparseChunk int
	// FullOutput computes every row in training (the last layer, layer 1
	// on ÂX), not only the rows the loss reads (output.go).
	FullOutput bool
	// BlockByBlock multiplies every peer block alone, never merged into
	// runs (merge.go): the same sums bit for bit, for comparisons.
	BlockByBlock bool `json:",omitempty"`
	// DeviceComm moves dense blocks where the backend keeps them (NCCL
	// in a CUDA build; host goes through the rank transport). The zero
	// value: the rank transport, as every exchange does by default.
	DeviceComm collectives.DeviceComm `json:"device_comm,omitempty"`
}

// RunConfig is where the run computes, when it evaluates and checkpoints,
// and what it tells.
type RunConfig struct {
	EvalEvery EvalEvery // evaluate every k epochs and after the last (0: after the last only), or EvalAuto
	// Checkpoints: every CheckpointEvery epochs (0: only when stopped) into
	// CheckpointDir; Resume continues from its latest committed epoch.
	CheckpointDir   string
	CheckpointEvery int
	Resume          bool
	// Stop reports a local stop request (a signal); ranks agree on it at the
	// end of each epoch, checkpoint, and Run returns ErrStopped.
	Stop func() bool `json:"-"`
	// Training, if set, is called as the epochs start: a stop before it
	// has no epoch boundary to wait for.
	Training func() `json:"-"`
	// Device is the kernels backend the matrices live on (CUDA in a CUDA
	// build). A rank uses device LocalRank modulo the devices present
	// (LocalRank < 0: its rank). Backend, when set, is used instead (a
	// library caller's own, or a test's).
	Device    kernels.Device  `json:"device,omitempty"`
	Backend   kernels.Backend `json:"-"`
	LocalRank int             `json:"-"`
	// RanksOnHost is how many ranks share this host's memory (0: this one
	// alone; in-process ranks: RunShards counts them): the memory check
	// before training asks for all of theirs, not one rank's.
	RanksOnHost    int       `json:"-"`
	ProfileKernels bool      // time every kernel call by class (RankStats.KernelMs)
	BaseRSSMB      float64   `json:"-"` // the process's resident memory before it loaded data (RankStats.BaseRSSMB)
	Log            io.Writer `json:"-"` // per-epoch lines on rank 0 (nil: silent)
	Notices        io.Writer `json:"-"` // resumes and divergence on rank 0, even when quiet (nil: stderr)
}

// Defaults are the Kipf & Welling settings.
func Defaults() Config {
	return Config{
		Model:     ModelConfig{Arch: model.ArchGCN, Layers: 2, Hidden: 16, Heads: 8, OutHeads: 1, Dropout: 0.5, AttDropout: -1, Precompute: true},
		Optim:     OptimConfig{Epochs: 200, LR: 0.01, WeightDecay: 5e-4, Seed: 1, MaxLossGrowth: 100},
		Staleness: StalenessConfig{Policy: staleness.KindNone, Eps: -1, MaxStale: 10},
		Wire:      WireConfig{Fwd: wire.FP32, Grad: wire.AsForward, Error: 0.05, Allreduce: wire.FP32},
		Run:       RunConfig{EvalEvery: 1, LocalRank: -1},
	}
}

// rules are the settings and combinations a run refuses, each error naming
// the flags to change. A new feature that cannot combine with another adds
// its rule here.
var rules = []func(c *Config) error{
	wireRule,
	func(c *Config) error {
		if c.Model.Arch > model.ArchGAT {
			return fmt.Errorf("--model: unknown model %v (gcn, sage or gat)", c.Model.Arch)
		}
		return nil
	},
	func(c *Config) error {
		if c.Model.Arch.Attends() && (c.Model.Heads < 1 || c.Model.OutHeads < 1) {
			return fmt.Errorf("--heads, --out-heads: a GAT needs heads and out-heads ≥ 1, got %d and %d", c.Model.Heads, c.Model.OutHeads)
		}
		return nil
	},
	func(c *Config) error {
		if c.Batch.Mode > BatchSampled {
			return fmt.Errorf("--batch: unknown batch %v (global, clusters or sampled)", c.Batch.Mode)
		}
		return nil
	},
	sampledRule,
	func(c *Config) error {
		if !(c.Model.AttDropout < 1) {
			return fmt.Errorf("--att-dropout must be < 1 (< 0: as --dropout), got %g", c.Model.AttDropout)
		}
		return nil
	},
	func(c *Config) error {
		if c.Model.Layers < 1 {
			return fmt.Errorf("--layers must be ≥ 1, got %d", c.Model.Layers)
		}
		return nil
	},
	func(c *Config) error {
		if c.Model.Residual && c.Model.Layers < 3 {
			return fmt.Errorf("--residual skips around hidden layers between hidden layers: it needs 3 or more --layers, got %d", c.Model.Layers)
		}
		return nil
	},
	func(c *Config) error {
		if c.Model.Hidden < 1 {
			return fmt.Errorf("--hidden must be ≥ 1, got %d", c.Model.Hidden)
		}
		return nil
	},
	func(c *Config) error {
		if c.Optim.Epochs < 1 {
			return fmt.Errorf("--epochs must be ≥ 1, got %d", c.Optim.Epochs)
		}
		return nil
	},
	func(c *Config) error {
		if c.Run.EvalEvery < 0 && c.Run.EvalEvery != EvalAuto {
			return fmt.Errorf("--eval-every must be ≥ 0 (0: evaluate after the last epoch only) or auto, got %d", c.Run.EvalEvery)
		}
		return nil
	},
	func(c *Config) error {
		if g := c.Optim.MaxLossGrowth; !(g >= 0) || math.IsInf(g, 0) {
			return fmt.Errorf("--max-loss-growth must be a finite ≥ 0 (0: off), got %g", g)
		}
		return nil
	},
	func(c *Config) error {
		if lr := c.Optim.LR; !(lr > 0) || math.IsInf(lr, 0) {
			return fmt.Errorf("--lr must be > 0, got %g", lr)
		}
		return nil
	},
	func(c *Config) error {
		if d := c.Model.Dropout; !(d >= 0 && d < 1) {
			return fmt.Errorf("--dropout must be in [0,1), got %g", d)
		}
		return nil
	},
	func(c *Config) error {
		if wd := c.Optim.WeightDecay; !(wd >= 0) || math.IsInf(wd, 0) {
			return fmt.Errorf("--weight-decay must be ≥ 0, got %g", wd)
		}
		return nil
	},
	func(c *Config) error {
		o := c.Optim
		if !(o.Clip >= 0 && o.ClipScale >= 0) || math.IsInf(o.Clip+o.ClipScale, 0) {
			return fmt.Errorf("--clip and --clip-scale must be ≥ 0")
		}
		return nil
	},
	func(c *Config) error {
		if c.Exchange.RingChunk < 0 {
			return fmt.Errorf("--chunk must be ≥ 0, got %d", c.Exchange.RingChunk)
		}
		return nil
	},
	func(c *Config) error {
		if c.Exchange.SparseChunk < 0 {
			return fmt.Errorf("--exchange-chunk must be ≥ 0 (0: 64 MiB), got %d", c.Exchange.SparseChunk)
		}
		return nil
	},
	func(c *Config) error {
		if c.Run.CheckpointEvery < 0 {
			return fmt.Errorf("--checkpoint-every must be ≥ 0, got %d", c.Run.CheckpointEvery)
		}
		return nil
	},
	func(c *Config) error {
		if (c.Run.CheckpointEvery > 0 || c.Run.Resume) && c.Run.CheckpointDir == "" {
			return fmt.Errorf("--checkpoint-every and --resume need --checkpoint-dir")
		}
		return nil
	},
}

// sampledRule refuses the sampled-batch settings that cannot work.
func sampledRule(c *Config) error {
	b := c.Batch
	if !b.Mode.Sampled() {
		if len(b.Fanouts) > 0 || b.Size != 0 || b.Draw != sample.DrawLocal || b.Prefetch || b.Migrate != MigrateFeatures {
			return fmt.Errorf("--fanouts, --batch-size, --batch-draw, --sample-ahead and --migrate are settings of --batch sampled, not --batch %v", b.Mode)
		}
		return nil
	}
	if !b.Migrate.Model() && (b.Pregather || b.Merge != 0) {
		return fmt.Errorf("--pregather and --merge-micrographs are settings of --migrate model, not --migrate %v", b.Migrate)
	}
	switch {
	case len(b.Fanouts) != c.Model.Layers:
		return fmt.Errorf("--fanouts gives %d fanouts (%v); --layers %d needs one per layer", len(b.Fanouts), b.Fanouts, c.Model.Layers)
	case b.Size < 1:
		return fmt.Errorf("--batch-size must be ≥ 1 training vertices, got %d", b.Size)
	case b.Draw > sample.DrawGlobal:
		return fmt.Errorf("--batch-draw: unknown draw %v (local or global)", b.Draw)
	case b.Migrate > MigrateModel:
		return fmt.Errorf("--migrate: unknown choice %v (features or model)", b.Migrate)
	case b.Migrate.Model() && !b.Draw.IndependentOfP():
		return fmt.Errorf("--migrate model trains the global batch's micrographs at their homes: give --batch-draw global, not %v", b.Draw)
	case b.Merge < MergeAuto:
		return fmt.Errorf("--merge-micrographs must be auto or ≥ 0 time steps, got %d", int(b.Merge))
	case c.Model.Residual:
		return fmt.Errorf("--residual is not computed on sampled blocks: drop it, or use --batch global")
	case c.Optim.Clip > 0:
		return fmt.Errorf("--clip is SANCUS's per-rank clipping of a full-graph step; a sampled step sums one gradient over ranks: drop --clip, or use --batch global")
	case c.Wire.Fwd.IsAuto():
		return fmt.Errorf("--batch sampled fetches features in one width: give --wire fp32, bf16, int8, int4 or int2, not auto")
	case c.Staleness.Policy != staleness.KindNone:
		return fmt.Errorf("--staleness %v skips broadcasts of the whole graph's blocks: --batch sampled sends none; leave --staleness none", c.Staleness.Policy)
	}
	for l, k := range b.Fanouts {
		if k < 1 {
			return fmt.Errorf("--fanouts: layer %d's fanout must be ≥ 1, got %d", l+1, k)
		}
	}
	return nil
}

// wireRule refuses the wire settings that cannot combine.
func wireRule(c *Config) error {
	w := c.Wire
	fwd, grad := w.Fwd.Or(wire.FP32), w.Grad.Or(w.Fwd.Or(wire.FP32))
	if !(w.Error >= 0) || math.IsInf(w.Error, 0) {
		return fmt.Errorf("--wire-error must be a finite bound ≥ 0, got %g", w.Error)
	}
	if (fwd.IsAuto() || grad.IsAuto()) && !(w.Error > 0 && w.Error < 1) {
		return fmt.Errorf("--wire auto needs --wire-error in (0,1), got %g", w.Error)
	}
	switch {
	case w.CacheBits && !fwd.Quantized() && !grad.Quantized():
		return fmt.Errorf("--cache-bits keeps blocks in the wire's bits: it needs --wire or --wire-grad narrower than fp32")
	case w.CacheBits && w.Delta:
		return fmt.Errorf("--cache-bits cannot hold --wire-delta's copies: a delta is added to a float32 copy")
	}
	if a := w.Allreduce.Or(wire.FP32); a != wire.FP32 && a != wire.BF16 {
		return fmt.Errorf("--wire-allreduce: %v is not an allreduce format (fp32 or bf16)", a)
	}
	return nil
}

// Precomputed is the product with X that layer 1 reads from its shard (0:
// X itself): with --precompute, the model's (Precomputable), where a
// step reads the whole graph's Â (BatchMode.ReadsX).
func (c Config) Precomputed() shard.Aggregation {
	if !c.Model.Precompute || c.Batch.Mode.ReadsX() {
		return 0
	}
	return Precomputable(c.Model.Arch)
}

// Precomputable is the product with the constant X that a model's layer 1
// can read instead of aggregating X every epoch: ÂX for a GCN, D⁻¹AX (the
// neighbours' mean) for GraphSAGE; none for GAT, whose attention depends
// on the weights.
func Precomputable(a model.Arch) shard.Aggregation {
	switch {
	case a.ReadsAX():
		return shard.Sym
	case a.ReadsMeanX():
		return shard.Mean
	}
	return 0
}

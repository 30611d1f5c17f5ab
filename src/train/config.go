package train

import (
	"sancus/src/model"

	"fmt"
	"io"
	"math"

	"sancus/src/staleness"
)

// Config is one training run.
type Config struct {
	// Model is the family: GCN (Kipf and Welling), GraphSAGE-mean or GAT
	// (Veličković et al.). GraphSAGE and GAT read X in layer 1: the ÂX
	// shortcut is a GCN's.
	Model  model.Arch
	Layers int
	Hidden int // a GAT's: per head
	// Residual adds each hidden layer's input to its output, where the
	// widths match (every layer but the first and the last).
	Residual    bool
	Epochs      int
	LR          float64
	Dropout     float64
	WeightDecay float64 // L2 on the first layer's weights (Kipf & Welling); a GAT's on every parameter
	Seed        uint64

	// Batch "clusters" trains on ClustersPerStep of the shards' clusters per
	// step (batch.go); "" or "global": the whole graph every step.
	// BatchScript, if set, lists each epoch's steps instead of drawing them
	// (tests).
	Batch           string
	ClustersPerStep int
	Boundary        bool                    // a batch's rows also read their neighbours outside it, from the caches
	BatchScript     func(epoch int) [][]int `json:"-"`

	// GAT: heads of the hidden layers (concatenated) and of the output
	// layer (averaged), and the dropout of attention coefficients (< 0: as
	// Dropout).
	Heads, OutHeads int
	AttDropout      float64

	// Precompute uses the shard's (ÂX)_i: exact, and layer 1 sends nothing.
	Precompute bool

	Staleness string  // none, epoch-fixed, epoch-adaptive, variation-gap
	Eps       float64 // the policy's bound (epochs, or relative change)
	MaxStale  int     // hard cap on epochs of staleness for every policy

	// Clip scales each rank's broadcast gradient block δ_i down to norm
	// th_i = ClipScale·Clip when it is larger; 0 disables. ClipScale 0
	// means √P, as in SANCUS.
	Clip      float64
	ClipScale float64

	FreshDiagonal  bool    // use the fresh own block instead of the shared cached one
	FullOutput     bool    // every row in training (the last layer, layer 1 on ÂX), not only the rows the loss reads (output.go)
	ProfileKernels bool    // time every kernel call by class (RankStats.KernelMs)
	BaseRSSMB      float64 `json:"-"` // the process's resident memory before it loaded data (RankStats.BaseRSSMB)
	SkipGradients  bool    // the SkipG baseline: gradient broadcasts obey the policy too
	NativeBcast    bool    // MPI_Bcast instead of the ring, for comparison
	// DenseBcast broadcasts whole blocks (SANCUS as published); by default
	// each root sends every rank only the rows its block of Â references.
	DenseBcast bool
	Chunk      int // ring pipeline chunk in floats (0: default)
	// ExchangeChunk bounds the bytes of rows in one message of the sparse
	// exchange (0: 64 MiB): a peer's rows go in chunks, through two pack
	// buffers per peer.
	ExchangeChunk int

	// The wire (collectives/wire): forward blocks travel as Wire, gradient
	// blocks as WireGrad ("": as Wire) — fp32, bf16, int8, int4, int2, or
	// auto (the owner picks the fewest bits whose relative error stays
	// under WireError). WireDelta sends a refreshed root's change against
	// the copy every rank holds. WireAllreduce bf16 halves the weight-
	// gradient allreduce, with error feedback.
	Wire, WireGrad string
	WireError      float64
	WireDelta      bool
	CacheBits      bool // keep received blocks packed, decoding each when used
	WireAllreduce  string
	EvalEvery      int // evaluate every k epochs and after the last (0: after the last only)

	// MaxLossGrowth stops training as diverged when the loss exceeds this
	// many times the first epoch's (0: only non-finite values stop it).
	MaxLossGrowth float64

	// Checkpoints: every CheckpointEvery epochs (0: only when stopped) into
	// CheckpointDir; Resume continues from its latest committed epoch.
	CheckpointDir   string
	CheckpointEvery int
	Resume          bool
	// Stop reports a local stop request (a signal); ranks agree on it at the
	// end of each epoch, checkpoint, and Run returns ErrStopped.
	Stop func() bool `json:"-"`

	// Device is the kernels backend the matrices live on ("" or "cpu";
	// "cuda" in a CUDA build). A rank uses device LocalRank modulo the
	// devices present (LocalRank < 0: its rank).
	Device    string `json:"device,omitempty"`
	LocalRank int    `json:"-"`
	// DeviceComm moves dense blocks where the backend keeps them ("nccl"
	// in a CUDA build; "host" goes through the rank transport). "": the
	// rank transport, as every exchange does by default.
	DeviceComm string `json:"device_comm,omitempty"`

	Log     io.Writer `json:"-"` // per-epoch lines on rank 0 (nil: silent)
	Notices io.Writer `json:"-"` // resumes and divergence on rank 0, even when quiet (nil: stderr)
}

// Defaults are the Kipf & Welling settings.
func Defaults() Config {
	return Config{Model: model.ArchGCN, Layers: 2, Hidden: 16, Epochs: 200, LR: 0.01, Dropout: 0.5, WeightDecay: 5e-4, Heads: 8, OutHeads: 1, AttDropout: -1,
		Seed: 1, Precompute: true, Staleness: "none", MaxStale: 10, EvalEvery: 1, MaxLossGrowth: 100, LocalRank: -1}
}

// Validate reports the first unusable setting.
func (c Config) Validate() error {
	_, err := c.Policy()
	return err
}

// Policy checks every setting and builds the staleness policy of forward
// blocks: the one place the bound is parsed.
func (c Config) Policy() (staleness.Policy, error) {
	switch {
	case c.Model > model.ArchGAT:
		return nil, fmt.Errorf("unknown model %v (gcn, sage or gat)", c.Model)
	case c.Model.Attends() && (c.Heads < 1 || c.OutHeads < 1):
		return nil, fmt.Errorf("a GAT needs heads and out-heads ≥ 1, got %d and %d", c.Heads, c.OutHeads)
	case c.Batch != "" && c.Batch != "global" && c.Batch != "clusters":
		return nil, fmt.Errorf("unknown batch %q (global or clusters)", c.Batch)
	case !(c.AttDropout < 1):
		return nil, fmt.Errorf("att-dropout must be < 1 (< 0: as --dropout), got %g", c.AttDropout)
	case c.Layers < 1:
		return nil, fmt.Errorf("layers must be ≥ 1, got %d", c.Layers)
	case c.Residual && c.Layers < 3:
		return nil, fmt.Errorf("--residual skips around hidden layers between hidden layers: it needs 3 or more layers, got %d", c.Layers)
	case c.Hidden < 1:
		return nil, fmt.Errorf("hidden must be ≥ 1, got %d", c.Hidden)
	case c.Epochs < 1:
		return nil, fmt.Errorf("epochs must be ≥ 1, got %d", c.Epochs)
	case c.EvalEvery < 0:
		return nil, fmt.Errorf("eval-every must be ≥ 0 (0: evaluate after the last epoch only), got %d", c.EvalEvery)
	case c.MaxLossGrowth < 0 || math.IsNaN(c.MaxLossGrowth):
		return nil, fmt.Errorf("max-loss-growth must be ≥ 0 (0: off), got %g", c.MaxLossGrowth)
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return nil, fmt.Errorf("lr must be > 0, got %g", c.LR)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return nil, fmt.Errorf("dropout must be in [0,1), got %g", c.Dropout)
	case !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0):
		return nil, fmt.Errorf("weight-decay must be ≥ 0, got %g", c.WeightDecay)
	case !(c.Clip >= 0 && c.ClipScale >= 0) || math.IsInf(c.Clip+c.ClipScale, 0):
		return nil, fmt.Errorf("clip and clip-scale must be ≥ 0")
	case c.Chunk < 0:
		return nil, fmt.Errorf("chunk must be ≥ 0, got %d", c.Chunk)
	case c.ExchangeChunk < 0:
		return nil, fmt.Errorf("exchange-chunk must be ≥ 0 (0: 64 MiB), got %d", c.ExchangeChunk)
	case c.CheckpointEvery < 0:
		return nil, fmt.Errorf("checkpoint-every must be ≥ 0, got %d", c.CheckpointEvery)
	case (c.CheckpointEvery > 0 || c.Resume) && c.CheckpointDir == "":
		return nil, fmt.Errorf("checkpoints need --checkpoint-dir")
	}
	if _, _, err := c.wireBits(); err != nil {
		return nil, err
	}
	return staleness.Parse(c.Staleness, c.Eps, c.MaxStale)
}

// Package result is the results JSON that every `sancus train` writes and
// `sancus report` reads. It imports nothing of sancus, so the report
// binary links no engine, kernels or transport.
package result

import (
	"encoding/json"
	"math"
	"time"
)

// MaxBytes bounds a results JSON for its readers: a run's curves and
// per-rank figures take megabytes, and a larger file is some other file.
const MaxBytes = 1 << 30

// Run is the results JSON of one training run.
type Run struct {
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Host    string    `json:"host"`
	// Cores is the cores rank 0's host has, and RanksOnHost how many of the
	// run's ranks ran there: with the kernel threads a rank, whether the
	// run oversubscribed it.
	Cores       int    `json:"cores,omitempty"`
	RanksOnHost int    `json:"ranks_on_host,omitempty"`
	JobID       string `json:"job_id,omitempty"`
	Launcher    string `json:"launcher"`
	// Link is the emulated link the ranks talked over (slurm/emu-link.sh
	// sets SANCUS_LINK: its rate, or none), empty outside one.
	Link string `json:"link,omitempty"`
	// LinkGBs is the rate measured between ranks at start (GB/s per rank,
	// every rank sending at once), where train chose the wire by it;
	// WireChosen says what it chose, if it changed the default.
	LinkGBs    float64 `json:"link_gbs,omitempty"`
	WireChosen string  `json:"wire_chosen,omitempty"`
	// LinkLatencyUs is a word's time between ranks, measured beside the
	// rate: what sancus plan's --latency-us stands for.
	LinkLatencyUs float64 `json:"link_latency_us,omitempty"`
	Dataset       string  `json:"dataset"`
	Shards        string  `json:"shards,omitempty"` // the shard directory trained on, if any
	// Partitioner is what cut the graph into the ranks' rows: the shards'
	// (their meta.json), or contiguous for a run on a whole dataset.
	Partitioner string `json:"partitioner,omitempty"`
	Nodes       int    `json:"nodes"`
	// Config is the engine's whole configuration as it ran; read back, it
	// is the raw JSON, and Settings holds the part a report reads.
	Config   any      `json:"config"`
	Result   *Result  `json:"result"`
	Settings Settings `json:"-"`

	Path string `json:"-"`
}

// Settings is the part of a run's configuration that labels and groups
// runs in a report (a test in src/train holds it to the engine's Config).
type Settings struct {
	Model           string
	Staleness       string
	Eps             float64
	MaxStale        int
	Batch           string
	ClustersPerStep int
	Wire            string
	Seed            uint64
	// Exchange is "dense" (whole blocks broadcast, SANCUS as published),
	// "sparse" (only the rows each rank reads), or "" where a result from
	// before the choice existed does not say.
	Exchange string
}

// UnmarshalJSON reads Settings from a run's configuration: its groups, or
// the flat fields of results written before it was grouped.
func (s *Settings) UnmarshalJSON(b []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return err
	}
	if st := top["Staleness"]; len(st) > 0 && st[0] == '"' { // flat: the policy's name is a string
		type flat Settings
		if err := json.Unmarshal(b, (*flat)(s)); err != nil {
			return err
		}
		var dense struct{ DenseBcast *bool }
		err := json.Unmarshal(b, &dense)
		s.Exchange = exchange(dense.DenseBcast)
		return err
	}
	var g struct {
		Model     struct{ Arch string }
		Staleness struct {
			Policy   string
			Eps      float64
			MaxStale int
		}
		Batch struct {
			Mode            string
			ClustersPerStep int
		}
		Wire     struct{ Fwd string }
		Exchange struct{ Dense *bool }
		Optim    struct{ Seed uint64 }
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return err
	}
	*s = Settings{Model: g.Model.Arch, Staleness: g.Staleness.Policy, Eps: g.Staleness.Eps, MaxStale: g.Staleness.MaxStale,
		Batch: g.Batch.Mode, ClustersPerStep: g.Batch.ClustersPerStep, Wire: g.Wire.Fwd, Seed: g.Optim.Seed, Exchange: exchange(g.Exchange.Dense)}
	return nil
}

func exchange(dense *bool) string {
	switch {
	case dense == nil:
		return ""
	case *dense:
		return "dense"
	}
	return "sparse"
}

// UnmarshalJSON keeps the configuration raw and reads its Settings.
func (r *Run) UnmarshalJSON(b []byte) error {
	type plain Run
	var p struct {
		plain
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = Run(p.plain)
	r.Config = p.Config
	if len(p.Config) == 0 || string(p.Config) == "null" {
		return nil
	}
	return json.Unmarshal(p.Config, &r.Settings)
}

// Epoch is one line of the training curve.
type Epoch struct {
	Epoch     int     `json:"epoch"`
	Loss      float64 `json:"loss"`
	TrainAcc  float64 `json:"train_acc"`
	ValAcc    float64 `json:"val_acc"`
	TestAcc   float64 `json:"test_acc"`
	ValLoss   float64 `json:"val_loss"`
	Ms        float64 `json:"ms"`      // training step (forward, backward, update)
	EvalMs    float64 `json:"eval_ms"` // evaluation forward
	Sent      int     `json:"bcast_sent"`
	Skipped   int     `json:"bcast_skipped"`
	BytesSent int64   `json:"bytes_sent"` // this rank, training traffic only
	// Of BytesSent, the blocks or rows the layers exchanged (broadcasts,
	// sparse exchanges and reductions, sampled neighbours and features) and
	// the weight-gradient allreduce; the rest is the ranks' agreement on
	// metrics and stops.
	ExchangeBytes  int64 `json:"exchange_bytes"`
	AllreduceBytes int64 `json:"allreduce_bytes"`
	Messages       int64 `json:"messages"` // point-to-point messages this rank sent in training
	// QuantErr is the mean relative error ‖decoded − block‖/‖block‖ of the
	// forward blocks encoded this epoch (quantized wire only).
	QuantErr  float64 `json:"quant_error,omitempty"`
	Evaluated bool    `json:"evaluated"`
	Metric    string  `json:"-"` // for the epoch line: micro-f1 when multi-label
	// Sampling is what the epoch's sampled mini-batches cost (--batch
	// sampled only).
	Sampling *Sampling `json:"sampling,omitempty"`
}

// Sampling is an epoch of sampled mini-batches: its totals over every
// rank and step, each step's, and each rank's bytes.
type Sampling struct {
	Steps int `json:"steps"`
	SampledCounts
	Batches     []SampledCounts `json:"batches"`       // step by step, summed over ranks
	RankBytes   []int64         `json:"rank_bytes"`    // each rank's bytes sent in sampling and fetching
	RankSeconds []float64       `json:"rank_sample_s"` // each rank's seconds sampling and fetching, wherever it ran
	// RankExposed is each rank's seconds of training waiting for its
	// batches: all of RankSeconds, unless they were sampled ahead.
	RankExposed []float64 `json:"rank_exposed_s"`
	// Migration is what moving the model cost (--migrate model only).
	Migration *Migration `json:"migration,omitempty"`
}

// Migration is an epoch of HopGNN's model migration, summed over ranks:
// the model's bytes beside the features', the measured locality of the
// micrographs and each rank's load in each time step.
type Migration struct {
	TimeSteps    int   `json:"time_steps"` // per iteration
	Merged       int   `json:"merged"`     // time steps merged away
	Pregather    bool  `json:"pregather"`
	ModelBytes   int64 `json:"model_bytes"`   // gradient accumulators sent between time steps
	FeatureBytes int64 `json:"feature_bytes"` // feature rows fetched
	// Colocated of NonRoot distinct non-root micrograph vertices live on
	// their root's home rank: RMicro, measured from the samples.
	Colocated int64   `json:"colocated"`
	NonRoot   int64   `json:"non_root"`
	RMicro    float64 `json:"r_micro"`
	// RankStepRoots[r][t] and RankStepVertices[r][t] are the micrographs
	// and block sources rank r trained in time step t, over the epoch's
	// iterations that moved the model.
	RankStepRoots    [][]int64 `json:"rank_step_roots"`
	RankStepVertices [][]int64 `json:"rank_step_vertices"`
	// Fallback iterations moved no model: it would have moved more bytes
	// than their features, so every rank fetched its slice's features.
	Fallback int `json:"fallback_batches"`
	// Seconds is the epoch's training on the slowest rank, which
	// --merge-micrographs auto compares from epoch to epoch.
	Seconds float64 `json:"seconds"`
}

// SampledCounts are the figures of sampled batches, summed over ranks.
type SampledCounts struct {
	Seeds          int64 `json:"seeds"`           // training vertices the loss covered
	Vertices       int64 `json:"vertices"`        // block sources over every layer
	Edges          int64 `json:"edges"`           // sampled edges over every layer
	FeaturesLocal  int64 `json:"features_local"`  // feature rows a rank read from its own shard
	FeaturesRemote int64 `json:"features_remote"` // feature rows fetched from other ranks
	Bytes          int64 `json:"bytes"`           // sent in sampling and fetching
	FeatureBytes   int64 `json:"feature_bytes"`   // of Bytes, the feature rows'
}

// Memory is what a rank holds, by component, in MB (their sum is the
// rank's compulsory memory), and what the engine estimated of it before
// it built its layers.
type Memory struct {
	GraphMB       float64 `json:"graph_mb"`       // Â's blocks (and a layer's copies of them), labels, splits
	OwnMB         float64 `json:"own_mb"`         // its rows of the input: X, ÂX as the engine holds them
	ActivationsMB float64 `json:"activations_mb"` // every layer's buffers
	CachesMB      float64 `json:"caches_mb"`      // the blocks of other ranks as training holds them
	EvalMB        float64 `json:"eval_mb"`        // the blocks of other ranks evaluation receives
	ExchangeMB    float64 `json:"exchange_mb"`    // the sparse exchange's pack buffers
	ModelMB       float64 `json:"model_mb"`       // weights, gradients, optimizer moments
	// Estimate is the pre-allocation estimate (train.EstimateMemory): the
	// same components, the working memory beyond them, and the peak.
	Estimate MemoryEstimate `json:"estimate"`
}

// MemoryEstimate is a rank's estimated memory by component, in MB.
type MemoryEstimate struct {
	GraphMB       float64 `json:"graph_mb"`
	OwnMB         float64 `json:"own_mb"`
	ActivationsMB float64 `json:"activations_mb"`
	CachesMB      float64 `json:"caches_mb"`
	EvalMB        float64 `json:"eval_mb"`
	ExchangeMB    float64 `json:"exchange_mb"`
	ModelMB       float64 `json:"model_mb"`
	WorkingMB     float64 `json:"working_mb"` // the base process, dropout's copies
	LoadMB        float64 `json:"load_mb"`    // the peak while the shard is read whole
	PeakMB        float64 `json:"peak_mb"`    // training's or the load's, the larger
}

// RankStats is one rank's share of the run (SANCUS Table 5).
type RankStats struct {
	Rank          int     `json:"rank"`
	Rows          int     `json:"rows"`
	ComputeSec    float64 `json:"compute_s"`
	CommSec       float64 `json:"comm_s"`      // time inside communication
	CommWaitSec   float64 `json:"comm_wait_s"` // communication not hidden behind compute
	BytesSent     int64   `json:"bytes_sent"`
	BytesRecv     int64   `json:"bytes_recv"`
	EvalBytesSent int64   `json:"eval_bytes_sent"`
	Messages      int64   `json:"messages"`      // point-to-point messages sent in training
	EvalMessages  int64   `json:"eval_messages"` // and in evaluation
	CacheBytes    int64   `json:"cache_bytes"`   // what the training caches hold
	CompulsoryMB  float64 `json:"compulsory_mb"` // data, layer buffers, caches, model
	Memory        Memory  `json:"memory"`        // CompulsoryMB by component
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	// PssMB is the process's proportional set size at the end of the run,
	// after its last evaluation, where a run peaks: the pages it shares with
	// other processes (the binary and the libraries every rank on a node
	// maps) count divided among them, so the sum over a node's ranks is
	// what they occupy together. The kernel keeps no peak of it.
	PssMB float64 `json:"pss_mb"`
	// BaseRSSMB is what the process held before it loaded any data: the
	// Go runtime and, under mpirun, the MPI library and its buffers.
	BaseRSSMB float64 `json:"base_rss_mb"`
	// KernelMs is, with --profile-kernels, the wall time of the kernel
	// calls by class over the whole run (training and evaluation).
	KernelMs map[string]float64 `json:"kernel_ms,omitempty"`
	// KernelMB is, with --profile-kernels, the compulsory bytes of those
	// calls by class, in MB (kernels.Timed says how they are counted): over
	// the triad's rate, the time the memory alone would take.
	KernelMB map[string]float64 `json:"kernel_mb,omitempty"`
	// StepMB is, with --profile-kernels, the compulsory bytes of the
	// training steps alone (no evaluation), in MB: per epoch, what the
	// epoch's memory-bound time is read from (sancus bench triad).
	StepMB float64 `json:"step_mb,omitempty"`
	// StepKernelMB and StepKernelGFLOP are the training steps' bytes (MB)
	// and the products' floating-point operations (GFLOP) by class, with
	// --profile-kernels: per class, the larger of bytes over the triad's
	// rate and flops over a GEMM's peak is the least time the class can
	// take (sancus bench triad sums them: the roofline bound).
	StepKernelMB    map[string]float64 `json:"step_kernel_mb,omitempty"`
	StepKernelGFLOP map[string]float64 `json:"step_kernel_gflop,omitempty"`
}

// Result is what a run reports; rank 0 writes it as the results JSON.
type Result struct {
	Ranks        int         `json:"ranks"`
	Policy       string      `json:"policy"`
	Model        string      `json:"model"`  // gcn, sage or gat
	Metric       string      `json:"metric"` // what the *_acc fields hold: accuracy, or micro-f1 (multi-label)
	LayerModes   []string    `json:"layer_modes"`
	Dims         []int       `json:"dims"`            // feature width, hidden widths …, classes
	Heads        []int       `json:"heads,omitempty"` // GAT: attention heads per layer
	Curve        []Epoch     `json:"curve"`
	BestEpoch    int         `json:"best_epoch"`
	BestValAcc   float64     `json:"best_val_acc"`
	TestAtBest   float64     `json:"test_acc_at_best_val"`
	FinalTestAcc float64     `json:"final_test_acc"`
	FinalLoss    float64     `json:"final_loss"`
	MeanEpochMs  float64     `json:"mean_epoch_ms"` // training step, epochs after the first
	TotalSec     float64     `json:"total_s"`
	PerRank      []RankStats `json:"per_rank"`
	// ComputeImbalance is the slowest rank's compute time over the mean
	// (1: equal work; what --balance-by is for).
	ComputeImbalance float64                     `json:"compute_imbalance"`
	Broadcasts       map[string]map[string][]int `json:"broadcast_epochs"` // layer -> root -> epochs
	Clipped          int                         `json:"clipped_blocks"`
	// WireBits is the mean width each layer's blocks were sent with
	// ("2 forward": 4 means int4), on rank 0.
	WireBits map[string]float64 `json:"wire_bits,omitempty"`
	Params   int                `json:"params"`
	SIMD     string             `json:"simd"`
	Threads  int                `json:"threads"`
	Device   string             `json:"device"`            // kernels backend
	Stopped  bool               `json:"stopped,omitempty"` // ended early by a stop request
	// Status is how training ended: completed, stopped (a signal, after a
	// checkpoint) or diverged (Error says where).
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Checkpoint is the last epoch committed to the checkpoint directory
	// (0: none). WriteErrors are the writes that failed while the run
	// went on: a checkpoint (retried at the next), a saved model.
	Checkpoint  int      `json:"checkpoint_epoch,omitempty"`
	WriteErrors []string `json:"write_errors,omitempty"`
	// EvalInterval is --eval-every auto's k, fixed by the first epoch
	// (0: not auto); a checkpoint carries it, so a resumed run evaluates
	// the epochs the uninterrupted one does.
	EvalInterval int `json:"eval_interval,omitempty"`
}

// JSON has no NaN or Inf: a diverged loss is written as null, so a run
// that went wrong still leaves its report.

// MarshalJSON writes non-finite losses as null.
func (r Epoch) MarshalJSON() ([]byte, error) {
	type plain Epoch
	return json.Marshal(struct {
		plain
		Loss    *float64 `json:"loss"`
		ValLoss *float64 `json:"val_loss"`
	}{plain(r), finite(r.Loss), finite(r.ValLoss)})
}

// MarshalJSON writes a non-finite final loss as null.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		FinalLoss *float64 `json:"final_loss"`
	}{plain(r), finite(r.FinalLoss)})
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Add adds o's counts.
func (c *SampledCounts) Add(o SampledCounts) {
	c.Seeds += o.Seeds
	c.Vertices += o.Vertices
	c.Edges += o.Edges
	c.FeaturesLocal += o.FeaturesLocal
	c.FeaturesRemote += o.FeaturesRemote
	c.Bytes += o.Bytes
	c.FeatureBytes += o.FeatureBytes
}

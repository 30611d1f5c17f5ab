package scaling

import (
	"fmt"
	"math"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/src/train"
)

// Cluster is the machine a job would run on.
type Cluster struct {
	Nodes        int // at most this many nodes
	RanksPerNode int // ranks placed on a node, in rank order
	CoresPerNode int // cores a node's ranks share (0: one a rank)
	// HostCores: every node is the same host (nodes emulated on one
	// machine), so all ranks of all nodes share its cores; 0: each node
	// has cores of its own (CoresPerNode).
	HostCores int     `json:",omitempty"`
	LinkGBs   float64 // each node's network bandwidth, GB/s each way
	LatencyUs float64 // per message
}

// ShareAt is how many ranks one core serves when p ranks run rpn to a
// node: where ranks outnumber the cores they share they take turns, so
// compute time is multiplied by it (memory bandwidth shared among them is
// not modelled). The cores shared are a node's, or, with HostCores, the
// one host's that all p ranks run on. Never below 1: Rates are one core's,
// and spare cores are not counted as speeding a rank up.
func (c Cluster) ShareAt(p, rpn int) float64 {
	ranks, cores := rpn, c.CoresPerNode
	if c.HostCores > 0 {
		ranks, cores = p, c.HostCores
	}
	if cores <= 0 || ranks <= cores {
		return 1
	}
	return float64(ranks) / float64(cores)
}

// Share is ShareAt for the whole cluster: every node full.
func (c Cluster) Share() float64 {
	return c.ShareAt(c.Nodes*c.RanksPerNode, c.RanksPerNode)
}

// Rates are one rank's effective compute rates (one core): sparse
// products over nonzeros, dense GEMMs over rows, the time each peer's
// block costs beyond its flops (its own product call, packing, posting),
// each value of a row a peer block's product passes over
// (Work.PassedValues) and each
// byte of rows packed to send or taken in (Work.Bytes).
type Rates struct {
	SpMMGflops, GEMMGflops float64
	BlockUs                float64
	PassNs                 float64 `json:",omitempty"`
	ByteNs                 float64 `json:",omitempty"`
	// OneRate: the calibration could not tell sparse from dense flops
	// apart (their flops in one ratio across the replayed ranks, or one kind
	// missing) and fitted one rate to both.
	OneRate bool `json:",omitempty"`
}

// Work is one rank's work of a training epoch.
type Work struct {
	SpMM, GEMM float64 // flops
	Blocks     float64 // peer blocks sent and received, every flow
	// PassedValues: the values of the rows the products with received
	// peer blocks pass over, each block's (or merged run's) rows with
	// entries, the restricted last layer's too, times the flow's width: a
	// row passed is read and written again whole. At most a value a
	// nonzero, so at large P, where a peer's block holds one or two
	// entries a row, about the product's own traffic.
	PassedValues float64
	// Bytes: the rows the exchanges pack to send and take in, in bytes:
	// copies through memory, a cost that grows with the rows' width where
	// the flops of their products do not (WorkMoving).
	Bytes float64
	// OwnSpMM is the part of SpMM with the rank's own block of Â: the
	// only work that needs none of the rows in flight, so the only work
	// an exchange can hide behind (the GEMMs wait for the rows, or come
	// before they are sent).
	OwnSpMM float64
}

// Model is a model's shape as the cost model reads it.
type Model struct {
	Dims  []int        // input features, hidden widths …, classes
	Flows []train.Flow // what travels (train.Config.Flows)
	// Params is what the gradient allreduce sums, in Allreduce's format.
	Params    int
	Allreduce wire.Format
	// Memory is what a rank's memory estimate reads beyond the counts
	// (train.EstimateMemory); without it no memory is predicted.
	Memory *MemoryInputs
}

// MemoryInputs are the run and the graph as the memory estimate reads
// them: the configuration, the input's nonzeros a row (X's, and the
// precomputed product's) and the graph's training nodes.
type MemoryInputs struct {
	Config            train.Config
	Features, Classes int
	XPerRow           float64 // X's nonzeros a row
	ProductPerRow     float64 // ÂX's (or D⁻¹AX's) nonzeros a row
	GlobalTrain, N    int64
	Reordered         bool // the partition renumbers nodes: every rank keeps their ids
	Precomputed       bool // the shards hold ÂX and D⁻¹AX (prepare --precompute)
}

// WorkOf is rank r's epoch: every flow's product with its block row of Â
// (2 flops a nonzero and value) and every layer's products with W
// (forward, ∇W and, above layer 1, ∂H: 2 flops a row, input and output).
func (m Model) WorkOf(r Rank) Work {
	var w Work
	for _, f := range m.Flows {
		w.SpMM += 2 * float64(r.NNZ) * float64(f.Width)
		w.OwnSpMM += 2 * float64(r.Diag) * float64(f.Width)
		s := r.Sets[f.Rows]
		w.Blocks += float64(s.SendPeers + s.RecvPeers)
		w.PassedValues += float64(s.PeerRows) * float64(f.Width) // each received block's occupied rows
	}
	for l := 0; l+1 < len(m.Dims); l++ {
		passes := 3.0
		if l == 0 {
			passes = 2
		}
		w.GEMM += passes * 2 * float64(r.Rows) * float64(m.Dims[l]) * float64(m.Dims[l+1])
	}
	return w
}

// WorkMoving is rank r's WorkOf with the bytes its exchanges move, t
// being its RankTraffic.
func (m Model) WorkMoving(r Rank, t Traffic) Work {
	w := m.WorkOf(r)
	w.Bytes = float64(t.ExchSent + t.ExchRecv)
	return w
}

// Seconds is the time work takes at rates.
func (w Work) Seconds(r Rates) float64 {
	return (w.SpMM/r.SpMMGflops+w.GEMM/r.GEMMGflops)/1e9 + w.Blocks*r.BlockUs/1e6 + (w.PassedValues*r.PassNs+w.Bytes*r.ByteNs)/1e9
}

// Prediction is one configuration's epoch.
type Prediction struct {
	P        int         `json:"ranks"`
	Nodes    int         `json:"nodes"`
	Wire     wire.Format `json:"wire"`
	EpochMs  float64     `json:"epoch_ms"`
	Compute  float64     `json:"compute_ms"`  // the slowest rank's
	Comm     float64     `json:"comm_ms"`     // its exchanges and allreduce
	Exposed  float64     `json:"exposed_ms"`  // of which not hidden behind its own block's product
	BytesMB  float64     `json:"mb_per_rank"` // sent + received, the busiest rank, exact
	MeanMB   float64     `json:"mean_mb_per_rank"`
	Messages int         `json:"messages_per_rank"` // the busiest rank's, exact
	MemoryMB float64     `json:"memory_mb_per_rank"`
	Memory   Memory      `json:"memory"`
	Exact    bool        `json:"bytes_exact"`
}

// Memory is the largest rank's estimated memory by component, in MB
// (train.MemoryEstimate): Peak is what MemoryMB reports.
type Memory struct {
	Graph, Own, Activations, Caches, Eval, Exchange, Model, Working, Load, Peak float64
}

// Predict is the epoch of counts' partition for m on cluster at rates:
// every rank computes its work (times the cluster's ShareAt for P ranks
// rpn to a node), sends its rows over its node's link (the node's ranks'
// bytes to other nodes, the larger way, over LinkGBs) and pays LatencyUs
// a message; the exchange
// hides behind the product with its own block (Work.OwnSpMM, shared as
// the compute is), the allreduce hides behind nothing. The epoch is the
// slowest rank's: every layer waits for every root.
func Predict(c Counts, m Model, cl Cluster, rates Rates) Prediction {
	p := c.P
	rpn := max(1, min(cl.RanksPerNode, p))
	nodes := (p + rpn - 1) / rpn
	pr := Prediction{P: p, Nodes: nodes, Exact: true}
	nodeOut, nodeIn := make([]float64, nodes), make([]float64, nodes)
	traffic := make([]Traffic, p)
	for r := range p {
		traffic[r] = RankTraffic(c, r, m.Flows, m.Params, m.Allreduce)
		nodeOut[r/rpn] += float64(traffic[r].OffSent)
		nodeIn[r/rpn] += float64(traffic[r].OffRecv)
	}
	bw := cl.LinkGBs * 1e9
	lat := cl.LatencyUs * 1e-6
	share := cl.ShareAt(p, rpn) // this P's placement, not the full cluster's
	var total float64
	for r := range p {
		t, rk := traffic[r], c.Ranks[r]
		w := m.WorkMoving(rk, t)
		compute := w.Seconds(rates) * share
		exch := math.Max(nodeOut[r/rpn], nodeIn[r/rpn])/bw + float64(t.Messages)*lat
		ar := allreduceSeconds(p, nodes, rpn, t.AllreduceSent, m.Params, bw, lat)
		hide := w.OwnSpMM / rates.SpMMGflops / 1e9 * share
		exposed := math.Max(0, exch-hide) + ar
		if epoch := (compute + exposed) * 1e3; epoch > pr.EpochMs {
			pr.EpochMs, pr.Compute, pr.Comm, pr.Exposed = epoch, compute*1e3, (exch+ar)*1e3, exposed*1e3
		}
		mb := float64(t.Sent+t.Recv) / 1e6
		pr.BytesMB = max(pr.BytesMB, mb)
		total += mb
		pr.Messages = max(pr.Messages, t.Messages)
		pr.Exact = pr.Exact && t.Exact
		if mem, ok := memoryOf(c, r, m); ok && mem.Peak > pr.MemoryMB {
			pr.MemoryMB, pr.Memory = mem.Peak, mem
		}
	}
	pr.MeanMB = total / float64(p)
	return pr
}

// allreduceSeconds is the gradient allreduce: below the ring's threshold
// the transport's own (2·log₂P latencies), else the ring (2(P−1)
// latencies); its bytes cross a node's link once per rank on it where the
// job spans nodes.
func allreduceSeconds(p, nodes, rpn int, sent int64, params int, bw, lat float64) float64 {
	if p == 1 {
		return 0
	}
	hops := 2 * math.Ceil(math.Log2(float64(p)))
	if params >= collectives.RingAllreduceMin {
		hops = 2 * float64(p-1)
	}
	t := hops * lat
	if nodes > 1 {
		t += float64(sent) * float64(rpn) / bw
	}
	return t
}

// memoryOf is rank r's memory as the engine estimates it before it
// allocates (train.EstimateMemory), from the partition's counts: the
// rows each cache holds are the row sets the exchange moves.
func memoryOf(c Counts, r int, m Model) (Memory, bool) {
	in := m.Memory
	if in == nil {
		return Memory{}, false
	}
	rk := c.Ranks[r]
	f := train.Footprint{P: c.P, Rank: r, Rows: rk.Rows, Train: rk.Train, NNZ: rk.NNZ, Diag: rk.Diag,
		GlobalTrain: in.GlobalTrain, N: in.N, Features: in.Features, Classes: in.Classes, MostRows: rk.Rows, RowsWithPeers: rk.RowsWithPeers}
	for s := range rk.Sets {
		f.Recv[s], f.Send[s] = rk.Sets[s].RecvRows, rk.Sets[s].SendRows
	}
	f.RecvPeers, f.SendPeers = rk.Sets[train.ViewRows].RecvPeers, rk.Sets[train.ViewRows].SendPeers
	// Peers that ask for all of this rank's rows take them unpacked: where
	// they ask, on average, for the share past which a peer asks for all.
	if share := int64(train.WholeBlockShare()); 100*f.Send[train.ViewRows] < share*int64(max(1, f.SendPeers))*int64(rk.Rows) {
		f.Packed = f.Send[train.ViewRows]
	}
	if f.RecvPeers > 0 {
		f.MostRows = max(f.MostRows, int(f.Recv[train.ViewRows]/int64(f.RecvPeers)))
	}
	f.GraphBytes = train.GraphBytes(rk.Rows, rk.NNZ, c.P, rk.Train, in.Reordered)
	rows := float64(rk.Rows)
	xnnz, pnnz := int64(in.XPerRow*rows), int64(in.ProductPerRow*rows)
	f.InputBytes, f.InputValues = train.InputBytes(in.Config, rk.Rows, in.Features, xnnz, pnnz)
	f.StoredBytes = train.StoredBytes(f.GraphBytes, rk.Rows, in.Features, xnnz, pnnz, in.Precomputed)
	est, err := in.Config.EstimateMemory(f)
	if err != nil {
		return Memory{}, false
	}
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	return Memory{Graph: mb(est.Graph), Own: mb(est.Own), Activations: mb(est.Activations), Caches: mb(est.Caches), Eval: mb(est.Eval),
		Exchange: mb(est.Exchange), Model: mb(est.Model), Working: mb(est.Working), Load: mb(est.Load), Peak: mb(est.Peak())}, true
}

// Check reports the first unusable cluster setting, naming its flag.
func (cl Cluster) Check() error {
	switch {
	case cl.Nodes < 1:
		return fmt.Errorf("--nodes must be ≥ 1, got %d", cl.Nodes)
	case cl.RanksPerNode < 1:
		return fmt.Errorf("--ranks-per-node must be ≥ 1, got %d", cl.RanksPerNode)
	case cl.LinkGBs <= 0:
		return fmt.Errorf("--link-gbs must be > 0 (each node's network bandwidth, GB/s), got %g", cl.LinkGBs)
	case cl.LatencyUs < 0:
		return fmt.Errorf("--latency-us must be ≥ 0, got %g", cl.LatencyUs)
	case cl.CoresPerNode < 0 || cl.HostCores < 0:
		return fmt.Errorf("--cores-per-node and --host-cores must be ≥ 0, got %d and %d", cl.CoresPerNode, cl.HostCores)
	case cl.CoresPerNode > 0 && cl.HostCores > 0:
		return fmt.Errorf("give --cores-per-node (each node its own cores) or --host-cores (every node one host's), not both")
	}
	return nil
}

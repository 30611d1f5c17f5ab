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
	Nodes        int     // at most this many nodes
	RanksPerNode int     // ranks placed on a node, in rank order
	CoresPerNode int     // cores a node's ranks share (0: one a rank)
	LinkGBs      float64 // each node's network bandwidth, GB/s each way
	LatencyUs    float64 // per message
}

// Share is how many ranks one core serves: where ranks outnumber a
// node's cores they take turns, so compute time is multiplied by it
// (memory bandwidth shared among a node's ranks is not modelled).
func (c Cluster) Share() float64 {
	if c.CoresPerNode <= 0 || c.RanksPerNode <= c.CoresPerNode {
		return 1
	}
	return float64(c.RanksPerNode) / float64(c.CoresPerNode)
}

// Rates are one rank's effective compute rates (one core): sparse
// products over nonzeros, dense GEMMs over rows, and the time each peer's
// block costs beyond its flops (its own product call, packing, posting).
type Rates struct {
	SpMMGflops, GEMMGflops float64
	BlockUs                float64
	// OneRate: the calibration could not tell sparse from dense flops
	// apart (too few of one kind in the replayed ranks) and fitted one
	// rate to both.
	OneRate bool `json:",omitempty"`
}

// Work is one rank's work of a training epoch.
type Work struct {
	SpMM, GEMM float64 // flops
	Blocks     float64 // peer blocks sent and received, every flow
}

// Model is a model's shape as the cost model reads it.
type Model struct {
	Dims  []int        // input features, hidden widths …, classes
	Flows []train.Flow // what travels (train.Config.Flows)
	// Params is what the gradient allreduce sums, in Allreduce's format.
	Params    int
	Allreduce wire.Format
}

// WorkOf is rank r's epoch: every flow's product with its block row of Â
// (2 flops a nonzero and value) and every layer's products with W
// (forward, ∇W and, above layer 1, ∂H: 2 flops a row, input and output).
func (m Model) WorkOf(r Rank) Work {
	var w Work
	for _, f := range m.Flows {
		w.SpMM += 2 * float64(r.NNZ) * float64(f.Width)
		s := r.Sets[f.Rows]
		w.Blocks += float64(s.SendPeers + s.RecvPeers)
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

// Seconds is the time work takes at rates.
func (w Work) Seconds(r Rates) float64 {
	return (w.SpMM/r.SpMMGflops+w.GEMM/r.GEMMGflops)/1e9 + w.Blocks*r.BlockUs/1e6
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

// Memory is the largest rank's estimated memory, in MB.
type Memory struct {
	Graph, Own, Activations, Caches float64
}

// Predict is the epoch of counts' partition for m on cluster at rates:
// every rank computes its work (times the cluster's Share), sends its
// rows over its node's link (the node's ranks' bytes to other nodes, the
// larger way, over LinkGBs) and pays LatencyUs a message; the exchange
// hides behind the product with its own block (its share of Â's
// nonzeros), the allreduce hides behind nothing. The epoch is the
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
	var total float64
	for r := range p {
		t, rk := traffic[r], c.Ranks[r]
		compute := m.WorkOf(rk).Seconds(rates) * cl.Share()
		exch := math.Max(nodeOut[r/rpn], nodeIn[r/rpn])/bw + float64(t.Messages)*lat
		ar := allreduceSeconds(p, nodes, rpn, t.AllreduceSent, m.Params, bw, lat)
		hide := compute * float64(rk.Diag) / float64(max(1, rk.NNZ))
		exposed := math.Max(0, exch-hide) + ar
		if epoch := (compute + exposed) * 1e3; epoch > pr.EpochMs {
			pr.EpochMs, pr.Compute, pr.Comm, pr.Exposed = epoch, compute*1e3, (exch+ar)*1e3, exposed*1e3
		}
		mb := float64(t.Sent+t.Recv) / 1e6
		pr.BytesMB = max(pr.BytesMB, mb)
		total += mb
		pr.Messages = max(pr.Messages, t.Messages)
		pr.Exact = pr.Exact && t.Exact
		mem := memoryOf(rk, m)
		if sum := mem.Graph + mem.Own + mem.Activations + mem.Caches; sum > pr.MemoryMB {
			pr.MemoryMB, pr.Memory = sum, mem
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

// memoryOf estimates one rank's memory: Â's block row (CSR, 8 bytes a
// nonzero, 8 a row), its own rows of the input and of every layer (four
// buffers a layer: output, product, their gradients), the caches of the
// rows it receives (float32, training and evaluation).
func memoryOf(r Rank, m Model) Memory {
	const mb = 1 << 20
	var mem Memory
	mem.Graph = float64(r.NNZ*8+int64(r.Rows)*8) / mb
	mem.Own = float64(r.Rows) * float64(m.Dims[0]) * 4 / mb
	var widths float64
	for _, d := range m.Dims[1:] {
		widths += float64(d)
	}
	mem.Activations = 4 * float64(r.Rows) * widths * 4 / mb
	for _, f := range m.Flows {
		rows := r.Sets[f.Rows].RecvRows
		if f.Reverse {
			rows = r.Sets[f.Rows].SendRows
		}
		mem.Caches += float64(rows) * float64(f.Width) * 4 / mb
		if f.Name == "forward" { // its evaluation cache holds the view's rows
			mem.Caches += float64(r.Sets[train.ViewRows].RecvRows) * float64(f.Width) * 4 / mb
		}
	}
	return mem
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
	}
	return nil
}

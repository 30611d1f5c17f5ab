package train

// What a rank must hold, to set next to its peak resident memory: the
// shard's data (ÂX as the engine keeps it: dense when dense), every layer's
// buffers, the block caches and the model with its optimizer state. Working copies beyond these (a dropout mask's
// copy of the input, a dense expansion of a sparse input, Aᵀ for the
// weight gradient, transport buffers) are what the peak adds.

import (
	"fmt"
	"reflect"
	"strings"

	"sancus/kernels/matrix"
	"sancus/launch"
	"sancus/src/result"
	"sancus/src/shard"
)

// memoryParts is this rank's compulsory memory by component, in MB, and
// what fitsMemory estimated of it.
func (e *Engine) memoryParts() result.Memory {
	m := e.memoryBytes()
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	x := e.tally.estimate
	return result.Memory{GraphMB: mb(m.Graph), OwnMB: mb(m.Own), ActivationsMB: mb(m.Activations), CachesMB: mb(m.Caches), EvalMB: mb(m.Eval), ExchangeMB: mb(m.Exchange), ModelMB: mb(m.Model),
		Estimate: result.MemoryEstimate{GraphMB: mb(x.Graph), OwnMB: mb(x.Own), ActivationsMB: mb(x.Activations), CachesMB: mb(x.Caches), EvalMB: mb(x.Eval),
			ExchangeMB: mb(x.Exchange), ModelMB: mb(x.Model), WorkingMB: mb(x.Working), LoadMB: mb(x.Load), PeakMB: mb(x.Peak())}}
}

// memoryBytes is what this rank holds, by component, as built: the graph
// (Â's blocks, labels, splits, the transposed blocks a reduction reads,
// GraphSAGE's values of D⁻¹A and A, the restricted last layer's blocks),
// its input rows (X, ÂX as the engine holds it), the activations (every
// layer's buffers and the output's gradient), the training caches (with a
// reduction's), evaluation's caches, the sparse exchange's pack buffers
// and the model (weights, the allreduce's gradient, Adam's moments).
// Working is left zero: it is what the peak adds.
func (e *Engine) memoryBytes() (m MemoryEstimate) {
	s := e.s
	m.Own = s.Features.Bytes() + e.tally.inputBytes + s.Multi.Bytes()
	for _, b := range s.Blocks {
		m.Graph += b.Bytes()
	}
	m.Graph += 4 * int64(len(s.Labels)+len(s.Train)+len(s.Val)+len(s.Test)+len(s.NodeIDs)+len(s.Clusters))
	for _, b := range e.part.blockT {
		if b != nil {
			m.Graph += b.Bytes()
		}
	}
	for _, b := range append(append([]*matrix.CSR{}, e.part.sage.mean...), e.part.sage.adj...) {
		m.Graph += 4 * int64(len(b.Val)) // the pattern is Â's
	}
	var lent int64
	runs := map[*matrix.CSR]bool{} // a run's block, shared by caches over the same blocks
	for _, L := range e.layers {
		m.Activations += bufferBytes(reflect.ValueOf(L).Elem())
		if x, ok := L.(reducer); ok {
			m.Caches += x.reduced().bytes()
		}
		for _, c := range L.base().caches() {
			m.Graph += c.restrictedBytes()
			if c.merge != nil {
				for _, r := range c.merge.runs {
					if !runs[r.block] {
						runs[r.block] = true
						m.Graph += r.bytes()
					}
				}
			}
			switch {
			case c != L.base().eval:
				m.Caches += c.bytes()
			case c.wire.lent: // the layers share one buffer (lendEvalSlots)
				lent = max(lent, c.bytes())
			default:
				m.Eval += c.bytes()
			}
		}
		if x, ok := L.(restricter); ok {
			m.Graph += x.restrictedBytes(e.part.blockT)
		}
	}
	m.Eval += lent
	m.Caches += e.packed.bytes()
	if e.out.lossGrad != nil { // the output's gradient, where the loss cannot write it over the logits
		m.Activations += 4 * int64(len(e.out.lossGrad.Data))
	}
	if x, ok := e.net.x.(*sparseExchange); ok {
		for _, bufs := range x.packed {
			for _, b := range bufs {
				m.Exchange += int64(len(b))
			}
		}
	}
	m.Model = 4 * int64(e.m.NumParams()) * 4 // weights, the allreduce's gradient, Adam's two moments
	return m
}

// compulsoryBytes is this rank's compulsory memory, every component.
func (e *Engine) compulsoryBytes() int64 { return e.memoryBytes().Compulsory() }

// bytes is what a cache holds: its copies of the blocks, packed copies and
// its masking and decoding buffers.
func (c *cache) bytes() int64 {
	n := c.copyBytes()
	if c.scratch != nil {
		n += 4 * int64(c.scratch.Rows*c.scratch.Cols)
	}
	return n
}

// restrictedBytes is the restricted last layer's blocks of a cache
// (output.go): Â's entries at the rows or columns training reads.
func (c *cache) restrictedBytes() int64 {
	var n int64
	for j := range c.blocks {
		if c.blocks[j] != c.full[j] {
			n += c.blocks[j].Bytes()
		}
	}
	return n
}

// copyBytes is what a cache's copies of the blocks take: float32 slots,
// packed copies (receive buffers, or --cache-bits' only copies, its own
// included) and a packed cache's buffers of its own: the one-block
// decoding buffer of a layer that reads blocks whole (GAT), decoded rows
// of its own encoding where the codec writes them. The range buffer the
// packed caches share is the engine's (packedScratch). A rank's own slot that is
// never written (route.direct) is not counted: its pages are never touched.
func (c *cache) copyBytes() int64 {
	var n int64
	for j := range c.host {
		if j == c.me && c.route.direct {
			continue
		}
		n += 4*int64(len(c.host[j])) + int64(len(c.wire.packed[j]))
	}
	if c.decoded != nil {
		n += 4 * int64(len(c.decoded.Data))
	}
	if c.wire.keepPacked { // an encoding's decoded rows where its codec writes them; a fused block's encoded rows
		n += 4*int64(len(c.wire.trial)) + int64(len(c.wire.fusedBytes))
	}
	return n
}

// A restricter is a layer that keeps blocks of its own for the restricted
// last layer, beyond the view's and the caches' (GAT's neighbour blocks):
// Â's entries, the graph's.
type restricter interface {
	restrictedBytes(blockT []*matrix.CSR) int64
}

var denseType = reflect.TypeOf((*matrix.Dense)(nil))

// bufferBytes adds up the float32 buffers of a layer struct: its
// *matrix.Dense and []float32 fields, those of the structs it embeds
// included. Caches are counted apart, and slices of matrices only alias
// fields (conv.extraGrads).
func bufferBytes(v reflect.Value) int64 {
	var n int64
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			n += bufferBytes(f)
		case f.Type() == denseType && !f.IsNil():
			n += 4 * f.Elem().FieldByName("Rows").Int() * f.Elem().FieldByName("Cols").Int()
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Float32:
			n += 4 * int64(f.Len())
		}
	}
	return n
}

// footprint is this rank's counts as the estimate reads them, from its
// shard before any collective: its graph and input as held (exact), and
// the rows each of its caches will hold, read off Â's blocks as the
// sparse exchange will choose them (sparseView: a peer's rows its block
// references, or all of them past wholeBlockShare; Â is symmetric, so the
// rows a peer needs of this rank are those its block with the peer has
// entries in).
func (e *Engine) footprint() Footprint {
	s := e.s
	f := Footprint{P: e.P, Rank: e.rank, Rows: e.rows(), Train: len(s.Train), GlobalTrain: int64(s.GlobalTrain), N: int64(s.N), StoredBytes: e.tally.stored,
		Features: s.FeatDim, Classes: s.Classes, InputBytes: s.Features.Bytes() + e.tally.inputBytes + s.Multi.Bytes()}
	f.GraphBytes = 4 * int64(len(s.Labels)+len(s.Train)+len(s.Val)+len(s.Test)+len(s.NodeIDs)+len(s.Clusters))
	if s.Features != nil {
		f.InputValues = 4 * int64(len(s.Features.Val))
	}
	f.MostRows = f.Rows
	sparse := !e.plan.Exchange.Dense && e.P > 1
	peerRow := make([]bool, f.Rows)
	for j, b := range s.Blocks {
		f.NNZ += b.NNZ()
		if j == e.rank {
			f.Diag = b.NNZ()
			f.GraphBytes += b.Bytes()
			continue
		}
		cols, read, rows := make([]bool, b.Cols), make([]bool, b.Cols), 0
		for r := range b.Rows {
			if b.RowPtr[r+1] > b.RowPtr[r] {
				rows++
				peerRow[r] = true
			}
			for p := b.RowPtr[r]; p < b.RowPtr[r+1]; p++ {
				cols[b.ColIdx[p]] = true
			}
		}
		for _, r := range s.Train {
			for p := b.RowPtr[r]; p < b.RowPtr[r+1]; p++ {
				read[b.ColIdx[p]] = true
			}
		}
		recv, send := int64(b.Cols), int64(f.Rows)
		if sparse {
			recv, send = int64(count(cols)), int64(rows)
			if recv*100 >= int64(wholeBlockShare)*int64(b.Cols) {
				recv = int64(b.Cols)
			}
			if send*100 >= int64(wholeBlockShare)*int64(f.Rows) {
				send = int64(f.Rows)
			} else {
				f.Packed += send
			}
		}
		// The view's compacted block: the same entries, its columns renumbered.
		f.GraphBytes += b.Bytes()
		f.MostRows = max(f.MostRows, int(recv))
		f.Recv[ViewRows] += recv
		f.Send[ViewRows] += send
		if recv > 0 {
			f.RecvPeers++
		}
		if send > 0 {
			f.SendPeers++
		}
		f.Recv[ReadByTraining] += int64(count(read))
		// j's training rows among those held: as many as its share of the
		// graph's (the shard does not know which of j's rows train).
		f.Recv[TrainingRows] += recv * f.GlobalTrain / max(1, f.N)
	}
	f.RowsWithPeers = int64(count(peerRow))
	return f
}

// count is how many of v are set.
func count(v []bool) int {
	n := 0
	for _, x := range v {
		if x {
			n++
		}
	}
	return n
}

// storedBytes is a shard as read: its blocks, lists, X and products.
func storedBytes(s *shard.Shard) int64 {
	n := s.Features.Bytes() + s.Multi.Bytes() + 4*int64(len(s.Labels)+len(s.Train)+len(s.Val)+len(s.Test)+len(s.NodeIDs)+len(s.Clusters))
	for _, b := range s.Blocks {
		n += b.Bytes()
	}
	for _, a := range []shard.Aggregate{s.AX, s.MX} {
		n += a.CSR.Bytes()
		if a.Dense != nil {
			n += 4 * int64(len(a.Dense.Data))
		}
	}
	return n
}

// fitsMemory refuses, before the layers are built, a plan whose estimated
// peak (EstimateMemory) exceeds what the machine has free: a mistyped
// --hidden would otherwise swap or be killed minutes later.
func (e *Engine) fitsMemory(dims []int) error {
	est, err := e.plan.Config.EstimateMemory(e.footprint())
	if err != nil {
		return err
	}
	e.tally.estimate = est
	avail, bound := launch.Available()
	if avail <= 0 {
		return nil
	}
	// Every rank on this host checks while the others have not allocated
	// yet: each asks for all of theirs, its rows' share times their count,
	// unless what bounds it is its own process's limit (ulimit).
	// The graph and input are already held, and counted in what is free.
	here := max(1, e.plan.Run.RanksOnHost)
	if strings.HasPrefix(bound, "ulimit") {
		here = 1
	}
	need := est.Training() - est.Graph - est.Own
	if total := float64(need) * float64(here); total > float64(avail) {
		return fmt.Errorf("rank %d: a %d-layer %s with widths %v needs %.1f GB for its weights and layer buffers, more than the %.1f GB free (with its caches, exchange buffers and working copies; %.1f GB a rank, %d on this host, beyond the graph it holds; its estimate: %s; see --hidden, --heads, or more ranks on more nodes)",
			e.rank, len(dims)-1, e.plan.Model.Arch, dims, total/1e9, float64(avail)/1e9, float64(need)/1e9, here, est)
	}
	return nil
}

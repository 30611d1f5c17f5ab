package train

// What a rank must hold, to set next to its peak resident memory: the
// shard's data (ÂX as the engine keeps it: dense when dense), every layer's
// buffers, the block caches and the model with its optimizer state. Working copies beyond these (a dropout mask's
// copy of the input, a dense expansion of a sparse input, Aᵀ for the
// weight gradient, transport buffers) are what the peak adds.

import (
	"fmt"
	"reflect"

	"sancus/kernels/matrix"
	"sancus/launch"
	"sancus/src/result"
)

// memoryParts is this rank's compulsory memory by component, in bytes:
// the graph (its shard: features, ÂX as the engine holds it, Â's blocks,
// labels and the transposed blocks a reduction reads), the activations
// (every layer's buffers and the output's gradient), the block caches
// (with a reduction's), and the model (weights, gradients, Adam's moments).
func (e *Engine) memoryParts() result.Memory {
	graph, act, caches, model := e.memoryBytes()
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	return result.Memory{GraphMB: mb(graph), ActivationsMB: mb(act), CachesMB: mb(caches), ModelMB: mb(model)}
}

// memoryBytes is memoryParts in bytes.
func (e *Engine) memoryBytes() (graph, act, caches, model int64) {
	s := e.s
	graph = s.Features.Bytes() + e.tally.inputBytes + s.Multi.Bytes()
	for _, b := range s.Blocks {
		graph += b.Bytes()
	}
	graph += 4 * int64(len(s.Labels)+len(s.Train)+len(s.Val)+len(s.Test)+len(s.NodeIDs)+len(s.Clusters))
	for _, b := range e.part.blockT {
		if b != nil {
			graph += b.Bytes()
		}
	}
	for _, L := range e.layers {
		act += bufferBytes(reflect.ValueOf(L).Elem())
		if x, ok := L.(reducer); ok {
			caches += x.reduced().bytes()
		}
		for _, c := range L.base().caches() {
			caches += c.bytes()
		}
		if x, ok := L.(restricter); ok {
			act += x.restrictedBytes(e.part.blockT)
		}
	}
	if e.out.lossGrad != nil { // the output's gradient, where the loss cannot write it over the logits
		act += 4 * int64(len(e.out.lossGrad.Data))
	}
	model = 4 * int64(e.m.NumParams()) * 4 // weights, gradients, Adam's two moments
	return graph, act, caches, model
}

// compulsoryBytes is this rank's compulsory memory, every component.
func (e *Engine) compulsoryBytes() int64 {
	graph, act, caches, model := e.memoryBytes()
	return graph + act + caches + model
}

// bytes is what a cache holds: its copies of the blocks, packed copies, its
// restricted blocks and its masking and decoding buffers.
func (c *cache) bytes() int64 {
	n := c.copyBytes()
	for j := range c.blocks {
		if c.blocks[j] != c.full[j] { // the last layer's restricted blocks (output.go)
			n += c.blocks[j].Bytes()
		}
	}
	if c.scratch != nil {
		n += 4 * int64(c.scratch.Rows*c.scratch.Cols)
	}
	return n
}

// copyBytes is what a cache's copies of the blocks take: float32 slots,
// packed copies (receive buffers, or --cache-bits' only copies) and a
// packed cache's one-block decoding buffer. A rank's own slot that is
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
	return n
}

// A restricter is a layer that keeps blocks of its own for the restricted
// last layer, beyond the view's and the caches' (GAT's neighbour blocks).
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

// fitsMemory refuses, before allocating, widths whose least memory (the
// weights with their gradient and Adam's two moments; each layer's output
// and its gradient at every row, twice for a GraphSAGE or GAT layer's
// second path) exceeds what the machine has free: a mistyped --hidden
// would otherwise swap or be killed minutes later.
func (e *Engine) fitsMemory(dims []int) error {
	avail := launch.AvailableBytes()
	if avail <= 0 {
		return nil
	}
	var params, widths float64
	for l := 0; l+1 < len(dims); l++ {
		params += float64(dims[l]) * float64(dims[l+1])
		widths += float64(dims[l+1])
	}
	paths := 2.0
	if e.plan.Model.Arch.HasRoot() || e.plan.Model.Arch.Attends() {
		paths = 4
	}
	need := 16*params + 4*paths*widths*float64(e.rows())
	// Every rank on this host checks while the others have not allocated
	// yet: each asks for all of theirs, its rows' share times their count.
	here := max(1, e.plan.Run.RanksOnHost)
	if total := need * float64(here); total > float64(avail) {
		return fmt.Errorf("rank %d: a %d-layer %s with widths %v needs at least %.1f GB for its weights and layer buffers, more than the %.1f GB free (%.1f GB a rank, %d on this host; see --hidden, --heads, or fewer ranks a node)",
			e.rank, len(dims)-1, e.plan.Model.Arch, dims, total/1e9, float64(avail)/1e9, need/1e9, here)
	}
	return nil
}

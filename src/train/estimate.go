package train

// One estimate of a rank's memory, from counts alone: the engine checks it
// before it allocates (fitsMemory) and records it beside what it measured
// (memoryParts), and sancus plan predicts it from a partition's counts
// (scaling). Both read it from a Footprint, so the two cannot drift; the
// test in estimate_test.go holds it to what a built engine allocates.

import (
	"fmt"

	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
	"sancus/src/shard"
	"sancus/src/staleness"
)

// Footprint is what one rank's memory is estimated from.
type Footprint struct {
	P, Rank     int
	Rows, Train int   // this rank's rows, its training rows
	NNZ         int64 // its block row of Â, self loops included
	Diag        int64 // of which in its own block
	// GraphBytes is Â's block row as the engine holds it, with its labels,
	// splits and node ids (GraphBytes estimates it from the counts).
	GraphBytes int64
	// InputBytes is layer 1's operands as the engine holds them: X (CSR or
	// dense), ÂX or D⁻¹AX; InputValues the values a dropout mask on a
	// sparse operand copies.
	InputBytes, InputValues int64
	// Recv and Send are the rows of each RowSet this rank receives from its
	// peers and sends them, summed over peers; RecvPeers and SendPeers how
	// many peers each way (ViewRows).
	Recv, Send           [3]int64
	RecvPeers, SendPeers int
	// Packed is the view rows this rank sends peers that ask for a part of
	// its rows (the others' go as they are, unpacked).
	Packed int64
	// MostRows is the rows of the largest block a cache holds, its own
	// included (what a one-block buffer is sized for).
	MostRows int
	// RowsWithPeers is this rank's rows with an entry in a peer's block.
	RowsWithPeers int64
	// StoredBytes is the shard as read, before the engine lets go of what
	// it does not read (X beside ÂX, the product it does not use): the
	// peak while loading.
	StoredBytes int64
	// GlobalTrain and N are the graph's training nodes and nodes.
	GlobalTrain, N    int64
	Features, Classes int
}

// MemoryEstimate is a rank's memory by component, in bytes.
type MemoryEstimate struct {
	Graph       int64 // Â's blocks (and what a layer derives from them: restricted, transposed), labels, splits
	Own         int64 // layer 1's input rows: X, ÂX
	Activations int64 // every layer's buffers, the loss's gradient
	Caches      int64 // peers' rows as training holds them: forward and gradient caches, reductions
	Eval        int64 // peers' rows evaluation receives, float32 and fresh every evaluation
	Exchange    int64 // the sparse exchange's pack buffers
	Model       int64 // weights, gradients, Adam's moments, the allreduce's buffer
	// Working is what a pass holds beyond these: the base process (Go
	// runtime, MPI), a dropout mask's copy of a sparse input and its
	// transpose. It counts in the peak, not in the compulsory bytes.
	Working int64
	// Load is the peak while the shard is read, whole, before the engine
	// lets go of what layer 1 does not read.
	Load int64
}

// Compulsory is every component but Working.
func (m MemoryEstimate) Compulsory() int64 {
	return m.Graph + m.Own + m.Activations + m.Caches + m.Eval + m.Exchange + m.Model
}

// Training is the estimated peak of training.
func (m MemoryEstimate) Training() int64 { return m.Compulsory() + m.Working }

// Peak is the estimated peak resident memory: training's, or the load's.
func (m MemoryEstimate) Peak() int64 { return max(m.Training(), m.Load) }

// baseBytes is a process's resident memory before it loads data: the Go
// runtime, and under mpirun the MPI library and its shared segments.
func baseBytes(p int) int64 {
	if p == 1 {
		return 10 << 20
	}
	return 20 << 20
}

// mergedBytes is what the runs of a rank's peer blocks take, merged
// (merge.go): nnz entries in peerRows rows of rows, over peers blocks;
// none where the blocks go one by one.
func mergedBytes(nnz, peerRows int64, rows, peers int) int64 {
	runs := MergeRuns(nnz, peerRows, peers)
	if peers < 2 || runs >= peers {
		return 0
	}
	n := 8*nnz + int64(runs)*8*int64(rows+1)
	if peerRows < int64(rows) { // a run's occupied rows, listed where some are empty
		n += int64(runs) * 12 * peerRows
	}
	return n
}

// GraphBytes is a rank's Â block row as the engine keeps it (one CSR per
// peer: row pointers, and a column and a value a nonzero) with its labels,
// splits and node ids, from the counts alone.
func GraphBytes(rows int, nnz int64, p, train int, reordered bool) int64 {
	n := 8*int64(p)*int64(rows+1) + 8*nnz
	n += 4 * int64(rows)               // labels
	n += 4 * int64(train+(rows-train)) // training, validation and test lists
	if reordered {
		n += 4 * int64(rows)
	}
	return n
}

// StoredBytes is a rank's shard as written by prepare from the counts:
// its graph, X as a CSR and, where precomputed, ÂX and D⁻¹AX (dense where
// dense enough).
func StoredBytes(graph int64, rows, features int, xnnz, pnnz int64, precomputed bool) int64 {
	n := graph + 8*int64(rows+1) + 8*xnnz
	if precomputed {
		prod := 8*int64(rows+1) + 8*pnnz
		if float64(pnnz) > matrix.DenseThreshold*float64(rows)*float64(features) {
			prod = 4 * int64(rows) * int64(features)
		}
		n += 2 * prod
	}
	return n
}

// InputBytes is a rank's layer-1 operands from the counts: X as a CSR of
// xnnz values (dense where DenseEnough), and the precomputed product with
// pnnz nonzeros (≤ 0: none read). It also returns the values a dropout
// copy of a sparse operand takes.
func InputBytes(c Config, rows, features int, xnnz, pnnz int64) (bytes, values int64) {
	csr := 8*int64(rows+1) + 8*xnnz
	operand := func(nnz int64) (int64, int64) {
		if float64(nnz) > matrix.DenseThreshold*float64(rows)*float64(features) {
			return 4 * int64(rows) * int64(features), 0
		}
		return 8*int64(rows+1) + 8*nnz, 4 * nnz
	}
	agg := c.Precomputed()
	if agg != 0 {
		bytes, values = operand(pnnz)
	}
	if agg != shard.Sym { // X beside it (GraphSAGE's root), or X alone
		b, v := operand(xnnz)
		if v == 0 { // expanded: the shard's CSR stays beside it
			b += csr
		}
		bytes += b
		values += v
	}
	return bytes, values
}

// EstimateMemory is the memory one rank of a plan for c holds, by
// component, from f's counts: every buffer newLayer makes for the layer
// kind it would choose, every cache at the rows it would hold, the model
// and its optimizer.
func (c Config) EstimateMemory(f Footprint) (MemoryEstimate, error) {
	var m MemoryEstimate
	dims, heads := c.Model.widths(f.Features, f.Classes)
	for _, w := range dims {
		if w < 1 {
			return m, fmt.Errorf("layer widths must be ≥ 1, got %v", dims)
		}
	}
	// The parameters as model.New makes them, counted, not allocated: a
	// mistyped --hidden is what the estimate is there to refuse.
	shape := &model.GCN{Dims: dims, Heads: heads}
	var params int64
	for l := 0; l+1 < len(dims); l++ {
		rows, cols := shape.Shape(l, 0)
		params += int64(rows)*int64(cols) + int64(dims[l+1])
		if c.Model.Arch.HasRoot() {
			params += int64(dims[l]) * int64(dims[l+1])
		}
		if heads != nil {
			params += 2 * int64(cols)
		}
	}
	m.Model = 4 * params * 4 // weights, the allreduce's gradient, Adam's two moments (∇W is a layer's)
	m.Graph, m.Own = f.GraphBytes, f.InputBytes
	r := int64(f.Rows)
	d := func(rows int64, cols int) int64 { return 4 * rows * int64(cols) }
	agg := c.Precomputed()
	sparse := f.P > 1 && !c.Exchange.Dense
	fwdBits, gradBits := c.Wire.Fwd.Or(wire.FP32).Bits(), c.Wire.Grad.Or(c.Wire.Fwd).Or(wire.FP32).Bits()
	never := c.Staleness.Policy == staleness.KindNone
	gradNever := never || !c.Staleness.SkipGradients
	restricted := !c.Exchange.FullOutput && c.Batch.Mode == BatchGlobal
	held := !c.Wire.Delta && !c.Wire.CacheBits && sparse
	view := f.Recv[ViewRows]
	// cache is one cache's slots: its peers' rows and its own slot unless
	// the layer's rows are read where they are (route.direct). With
	// --cache-bits every block, its own included, is held packed alone: a
	// product decodes a range of a block's rows at a time into the rank's
	// one buffer (rangeFloats), but a GAT layer's attention (whole) reads a
	// block decoded whole, and a gradient row with a bf16 tail is encoded
	// beside a decoded copy (tail).
	// One rank whose blocks are never stale encodes its own rows a range
	// at a time as its product reads them, and keeps no encoding (fused:
	// fusesOwn), dropping them into a buffer of a range (dropFloats).
	var rangeFloats, dropFloats int64
	ranges := false
	fuses := func(bits int, fresh bool) bool {
		return f.P == 1 && fresh && bits >= 2 && bits <= 8 && !c.Staleness.FreshDiagonal
	}
	cache := func(width int, recv int64, bits int, fresh, whole, tail bool) int64 {
		floats := bits == wire.FP32
		var n int64
		switch {
		case c.Wire.CacheBits && !floats && !whole && fuses(bits, fresh):
			ranges = true
			rangeFloats = max(rangeFloats, int64(min(f.Rows, fusedRows(width))*width))
			return recv*int64(wire.RowBytes(bits, width)) + int64(min(f.Rows, encodeRows)*wire.RowBytes(bits, width))
		case c.Wire.CacheBits && !floats:
			n = (recv + r) * int64(wire.RowBytes(bits, width))
			if whole {
				n += d(int64(f.MostRows), width)
			} else {
				ranges = true
				rangeFloats = max(rangeFloats, int64(min(f.MostRows, rangeRows(width))*width))
			}
			if tail {
				n += d(r, width)
			}
			return n
		case !floats:
			n = recv*int64(wire.RowBytes(bits, width)) + d(recv, width)
		default:
			n = d(recv, width)
		}
		if direct := (f.P == 1 || sparse) && fresh && floats; !direct {
			n += d(r, width)
		}
		return n
	}
	// caches are a communicating layer's training caches, forward (fw
	// wide) and gradient (gw wide; 0: none); its evaluation twin (float32,
	// fresh) goes to Eval.
	lendsEval := c.Batch.Mode == BatchGlobal
	caches := func(fw, gw int, last, attends bool) int64 {
		fr, gr := view, view
		if last && restricted && held {
			fr, gr = f.Recv[ReadByTraining], f.Recv[TrainingRows]
		}
		if ev := cache(fw, view, wire.FP32, true, attends, false); lendsEval {
			m.Eval = max(m.Eval, ev) // one buffer for every layer (lendEvalSlots)
		} else {
			m.Eval += ev
		}
		n := cache(fw, fr, fwdBits, never, attends, false)
		if gw > 0 {
			n += cache(gw, gr, gradBits, gradNever, attends, attends)
		}
		return n
	}
	// The pack buffers, one set per row size, each as large as the largest
	// send packed in it: none where every peer asks for all of this rank's
	// rows and they go as they are (sendsWhole); a quantized flow's rows go
	// from its encoding.
	rowBytes := map[int]int64{}
	pack := func(width, bits int, send int64, dropped bool) {
		if !sparse || bits != wire.FP32 {
			return
		}
		if !dropped && send == f.Send[ViewRows] {
			send = f.Packed
		}
		rb := wire.RowBytes(bits, width)
		chunk := int64(max(1, defaultExchangeChunk/rb))
		n := min(send, 2*chunk*int64(max(1, f.SendPeers))) * int64(rb)
		rowBytes[rb] = max(rowBytes[rb], n)
	}
	// A restricted last layer's blocks, Â's entries kept apart (graph): the
	// forward's at the training rows, the gradient's at the training columns
	// (P blocks, every one with its row pointers).
	trainShare := float64(f.Train) / float64(max(1, f.Rows))
	globalShare := float64(f.GlobalTrain) / float64(max(1, f.N))
	ptrs := 8 * int64(f.P) * (r + 1)
	restrictedFwd := ptrs + int64(8*float64(f.NNZ)*trainShare)
	restrictedGrad := ptrs + int64(8*float64(f.NNZ)*globalShare)
	sageBlocks := false
	// Shallow peer blocks merged into runs (merge.go) are their entries
	// again: the view's blocks once, GraphSAGE's M and A apart, and the
	// restricted last layer's forward and gradient blocks, each where its
	// blocks are shallow enough to merge.
	peers := f.P - 1
	if c.Exchange.BlockByBlock || c.Run.Device != kernels.DeviceCPU { // nothing merged
		peers = 0
	}
	viewMerged := mergedBytes(f.NNZ-f.Diag, f.RowsWithPeers, f.Rows, peers)
	sageGradMerged := viewMerged // GraphSAGE's gradient blocks are M's transpose
	fwdPacked := c.Wire.CacheBits && fwdBits != wire.FP32
	gradPacked := c.Wire.CacheBits && gradBits != wire.FP32
	merges := func(last, sage bool) {
		nnz := float64(f.NNZ - f.Diag)
		switch {
		case last && restricted:
			if !fwdPacked {
				m.Graph += mergedBytes(int64(nnz*trainShare), int64(float64(f.RowsWithPeers)*trainShare), f.Rows, peers)
			}
			if grad := int64(nnz * globalShare); !gradPacked {
				m.Graph += mergedBytes(grad, min(f.RowsWithPeers, grad), f.Rows, peers)
			}
		case sage && !gradPacked:
			m.Graph += sageGradMerged
			sageGradMerged = 0
		}
		m.Graph += viewMerged // (evaluation's, where the layer's own are packed or restricted)
		viewMerged = 0
	}
	for l := range c.Model.Layers {
		din, dout := dims[l], dims[l+1]
		last := l == c.Model.Layers-1
		first := l == 0
		m.Activations += d(r, dout) + d(int64(din), dout) + 4*int64(dout) // z, ∇W, ∇b
		hidden := func() {
			if !first {
				m.Activations += 2 * d(r, din) // the dropped input and its gradient
			}
		}
		// layerPack is a GCN layer's sends: the restricted last layer's
		// forward and gradient rows, which a peer's training rows read, and
		// a hidden layer's forward rows, which aggregating first the sender
		// drops as it packs (senderDrops).
		layerPack := func(width int, last, dropped bool) {
			pack(width, wire.FP32, f.Send[ViewRows], false) // evaluation
			switch {
			case last && restricted:
				m.Graph += restrictedFwd + restrictedGrad
				if held {
					pack(width, fwdBits, f.Recv[ReadByTraining], false) // Â is symmetric: as many as it reads
					pack(width, gradBits, int64(float64(f.Send[ViewRows])*trainShare), false)
				}
			default:
				pack(width, fwdBits, f.Send[ViewRows], dropped)
				pack(width, gradBits, f.Send[ViewRows], false)
			}
		}
		switch arch := c.Model.Arch; {
		case first && agg == shard.Mean:
			m.Activations += d(int64(din), dout) // ∇Root
		case arch.HasRoot():
			m.Activations += 3*d(r, dout) + d(int64(din), dout) + 4*r // U, ∂U, D⁻¹g; ∇Root; 1/deg
			hidden()
			m.Caches += caches(dout, dout, last, false)
			layerPack(dout, last, false)
			merges(last, true)
			if !sageBlocks { // M = D⁻¹A and A: values of their own, made once
				m.Graph += 8 * f.NNZ
				sageBlocks = true
			}
		case arch.Attends():
			h := heads[l]
			hf := dout
			if last {
				hf = h * dout
			}
			m.Activations += 6*d(r, h) + 2*d(r, hf)                              // el, m, s, c, ∂el, ∂er; O, O2
			m.Activations += 2*d(r, hf) + d(r, hf+h) + d(r, hf+3*h) + 2*d(1, hf) // U, ∂U, [U|er], [G|el|lse|δ], ∂al, ∂ar
			m.Activations += d(int64(din), hf) - d(int64(din), dout)             // ∇W is din × hf
			hidden()
			reduces := f.P > 1 && sparse && gradNever && !c.Wire.Delta && c.Batch.Mode == BatchGlobal
			if reduces {
				m.Caches += caches(hf+h, 0, false, true)
				m.Caches += d(view, hf+h) // the sums formed for the peers
				if rb := int64(wire.RowBytes(gradBits, hf) + wire.RowBytes(gradBits, h)); gradBits != wire.FP32 {
					m.Caches += (view+f.Send[ViewRows])*rb + 8*view // encoded both ways, each row's rounding key
				} else {
					m.Caches += d(f.Send[ViewRows], hf+h) // the peers' sums received
				}
				if l == 0 { // every peer's block transposed, once for every layer
					m.Graph += 8*(f.NNZ-f.Diag) + 8*(view+int64(f.P-1))
				}
			} else {
				m.Caches += caches(hf+h, hf+3*h, false, true)
			}
			switch {
			case !last || !restricted:
			case reduces: // the transposed blocks and its own at its training targets
				m.Graph += 8*(view+int64(f.P-1)+r+1) + int64(8*float64(f.NNZ)*trainShare) + restrictedFwd
			case f.P == 1:
				m.Graph += restrictedFwd + restrictedGrad
			}
			pack(hf+h, fwdBits, f.Send[ViewRows], false)
			pack(hf+h, wire.FP32, f.Send[ViewRows], false) // evaluation
		case first && agg == shard.Sym:
		case first || din > dout:
			m.Activations += 2 * d(r, dout) // U, ∂U
			hidden()
			m.Caches += caches(dout, dout, last, false)
			layerPack(dout, last, false)
			merges(last, false)
		default:
			m.Activations += 3 * d(r, din) // T, ∂T, ∂H
			// Layer 1 on ÂX writes its output as layer 2 drops it, into a
			// copy of its own, where layer 2 is the restricted last layer
			// (nextDrops); otherwise the product masks a block at a time,
			// its own included, into a buffer of the largest block's rows.
			copied := l == 1 && c.Model.Layers == 2 && agg == shard.Sym && restricted && (f.P == 1 || held) && (fwdBits == wire.FP32 || never && !c.Wire.CacheBits && !c.Wire.Delta)
			switch {
			case c.Model.Dropout <= 0:
			case copied:
				m.Activations += d(r, din)
			case c.Wire.CacheBits && fwdBits >= 2 && fwdBits <= 8 && !c.Staleness.FreshDiagonal:
				// Packed, a block is dropped a range at a time as it is
				// decoded, or, where no root is stale, by its owner as it
				// encodes it (dropsAsEncoded): no block's copy.
				switch {
				case fuses(fwdBits, never):
					dropFloats = max(dropFloats, int64(min(f.Rows, fusedRows(din))*din))
				case never:
					ranges = true
					rangeFloats = max(rangeFloats, int64(min(f.Rows, encodeRows)*din))
				}
			default:
				m.Caches += d(int64(f.MostRows), din)
			}
			m.Caches += caches(din, din, last, false)
			layerPack(din, last, never) // the sender drops its rows as it packs them
			merges(last, false)
		}
	}
	// The loss's gradient has a matrix of its own where the loss cannot
	// write it over the logits: where every row is computed.
	if !restricted {
		m.Activations += d(r, f.Classes)
	}
	if ranges { // the range buffer, and each output row's place in its nonzeros
		m.Caches += 4*(rangeFloats+dropFloats) + 8*r
	}
	for _, n := range rowBytes {
		m.Exchange += n
	}
	// A pass's working copies: a dropout mask's values of a sparse input,
	// and its transpose, which the weight gradient multiplies with.
	m.Working = baseBytes(f.P) + f.InputValues
	if f.InputValues > 0 {
		m.Working += 8*int64(f.Features+1) + 2*f.InputValues
	}
	m.Load = baseBytes(f.P) + f.StoredBytes
	return m, nil
}

// String is the estimate in GB, by component.
func (m MemoryEstimate) String() string {
	gb := func(n int64) float64 { return float64(n) / 1e9 }
	return fmt.Sprintf("%.2f GB: graph %.2f, own rows %.2f, activations %.2f, caches %.2f, evaluation %.2f, exchange %.2f, model %.2f, working %.2f (loading %.2f)",
		gb(m.Peak()), gb(m.Graph), gb(m.Own), gb(m.Activations), gb(m.Caches), gb(m.Eval), gb(m.Exchange), gb(m.Model), gb(m.Working), gb(m.Load))
}

// Package train is the SANCUS engine on one rank: Algorithm 3's forward and
// backward passes over a shard, epochs, evaluation and the run report. It
// talks to other ranks only through a collectives.Comm, so the whole
// algorithm runs in one process over the in-process transport in tests, and
// the package builds without MPI.
//
// In a default run every layer after the first (whose ÂX is precomputed)
// computes out_i = Σ_j Â_ij · B_j. The staleness policy decides which roots
// j are ACTIVE this epoch; each active root sends every rank only the rows
// of B_j that rank's block Â_ij references, point to point; a STALE root
// sends nothing, and every rank multiplies the copy it cached when j last
// sent. That decision, the only place a broadcast is skipped, is decide in
// sancus.go, where aggregate reads as decide → exchange → multiply (GAT's
// layer replaces multiply with its attention over each arriving block).
//
//	sancus.go    Algorithm 3: aggregate (decide, exchange, multiply), clipping
//	route.go     how each cache's blocks are made, sent, dropped and multiplied,
//	             fixed at set-up by one function that holds every feature's rule
//	exchange.go  the per-(layer, root) cache; dense ring and device exchangers
//	sparse.go    the sparsity-aware exchanger (the default) and its set-up
//	layers.go    one type per layer kind: local ÂX, transform-first, aggregate-first
//	sage.go      the GraphSAGE-mean layer (D⁻¹A forward, A·D⁻¹g backward)
//	gat.go       the GAT layer: online softmax over blocks as they arrive
//	wire.go      blocks encoded in fewer bits: the owner keeps what receivers decode
//	batch.go     cluster-batch training: each step's blocks restricted to its clusters
//	multilabel.go the sigmoid cross-entropy and micro-F1 of multi-label graphs
//	drift.go     variation-gap's row sample: drift measured without a second forward
//	output.go    the last layer computes, and moves, only the rows the loss reads
//	memory.go    the compulsory bytes a rank's peak memory is set against
//	predict.go   full-graph inference with given parameters
//	step.go      forward, backward (activations, residuals), gradient allreduce and Adam
//	run.go       epochs, evaluation, the agreement on metrics, the run report
//	engine.go    set-up: model, input, the exchange chosen once, the layers
//	checkpoint.go consistent per-rank checkpoints and bit-identical resume
package train

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
// # Rooms
//
// The package is four rooms, lowest first; a room uses the rooms below it,
// never one above (TestRoomsReachOnlyDown holds the first three to it).
//
// The exchange: the per-(layer, root) caches and how their blocks travel.
// It knows caches, blocks, the communicator and the wire; not the layers
// that fill the caches, the model or the optimizer.
//
//	exchange.go  the per-(layer, root) cache; dense ring and device exchangers
//	sparse.go    the sparsity-aware exchanger (the default) and its set-up
//	reduce.go    its transpose: sums formed for each peer's rows, sent back, added
//	wire.go      blocks encoded in fewer bits: the owner keeps what receivers decode
//	merge.go     shallow peer blocks merged into runs, each multiplied as one product
//
// The site: Algorithm 3 and the rest of what a layer may ask of the engine
// while it runs a pass, behind the layerSite interface. No epoch loop,
// optimizer or checkpoint here.
//
//	site.go      layerSite: the exchange, the kernels and operands, the drift sample
//	sancus.go    Algorithm 3: aggregate (decide, exchange, multiply), clipping
//	drift.go     variation-gap's row sample: drift measured without a second forward
//
// The layers: one type per layer kind, each pass run against a layerSite
// alone (never *Engine): what a layer needs beyond it, it was given when
// made (build.go).
//
//	layers.go    the layer interface; local ÂX, transform-first, aggregate-first
//	sage.go      the GraphSAGE-mean layer (D⁻¹A forward, A·D⁻¹g backward)
//	gat.go       the GAT layer: online softmax over blocks as they arrive, through
//	             the backend's Attention (or the CPU's on host copies)
//	activation.go ReLU, or a GAT's ELU (the CPU's on host copies where needed)
//
// The engine: set-up, the step, the epoch loop and the report; it may
// touch every room.
//
//	engine.go    set-up: model, input, the exchange chosen once
//	build.go     the layers made: each kind's buffers, caches and blocks
//	sampled.go   sampled mini-batches (src/sample, src/minibatch): set-up, epoch, update
//	migrate.go   HopGNN's model migration: micrograph time steps, replicas hopping the ring
//	route.go     how each cache's blocks are made, sent, dropped and multiplied,
//	             fixed at set-up by one function that holds every feature's rule
//	output.go    the last layer computes, and moves, only the rows the loss reads
//	step.go      forward, backward (activations, residuals), gradient allreduce and Adam
//	run.go       epochs, evaluation, the agreement on metrics, the run report
//	batch.go     cluster-batch training: each step's blocks restricted to its clusters
//	multilabel.go the sigmoid cross-entropy and micro-F1 of multi-label graphs
//	memory.go    the compulsory bytes a rank's peak memory is set against
//	checkpoint.go consistent per-rank checkpoints and bit-identical resume
//	predict.go   full-graph inference with given parameters
//	local.go     RunShards: already-cut shards trained as goroutine ranks
//	replay.go    one rank of a P-rank job replayed alone
//	config.go, plan.go, batchmode.go  the Config, resolved once into the Plan
//	traffic.go   each flow's bytes as a Config implies them, for sancus plan
//
// # Staleness
//
// --staleness none|epoch-fixed|epoch-adaptive|variation-gap with --eps sets
// SANCUS's bounds ε_E, ε_A (epochs) and ε_H (relative Frobenius change);
// without --eps they are the paper's (ε_E = ε_A = 1 epoch, ε_H = 0.03).
// Every policy obeys the hard cap --max-stale (default 10 epochs).
// Gradient blocks never skip unless --skip-gradients (the SkipG baseline).
// Variation-gap measures drift on a rank's noise-free rows (no dropout) at
// a fixed sample: every k-th row, at least 1,024 and one in 64 (a 2% error
// bound on the drift), through row subsets of the input and of Â's blocks,
// not a second forward over every row; the sampled drift stays within 5% of
// the whole block's (TestSampledDriftTracksWholeBlock).
// --fresh-diagonal multiplies a rank's own block with its fresh rows
// instead of the shared cached copy. --clip and --clip-scale clip each
// rank's gradient block at th_i = scale·th (scale 0: √P).
//
// # Precompute and the rows computed
//
// --precompute (default): X is constant, so layer 1's aggregation of it is
// computed once by prepare and layer 1 sends nothing: a GCN multiplies ÂX,
// GraphSAGE the neighbours' mean D⁻¹AX (beside its root term X·Root). It
// is exact without dropout; with dropout it drops entries of the product
// instead of X, a slightly different model (results/README.md measures
// what that costs per graph). GAT's attention depends on the weights, so
// it always reads X.
// --precompute=false is the paper's model. By default a GCN's or
// GraphSAGE's last layer aggregates in training only what the loss reads
// (its training rows forward, the columns of training nodes backward, and
// only those rows travel); a GAT's last layer attends at its training
// targets alone and sums its neighbour side over them alone, on one rank
// or where its neighbour sums are reduced (its rows travel whole);
// --full-output computes every row, with the same losses.
//
// # Exchange
//
// By default each root sends every rank only the rows its block of Â
// references, point to point, and caches hold only those rows; where a
// rank references 98% or more of a root's rows the root sends its block
// whole. --exchange-chunk bounds the bytes of one message (default 64
// MiB; a peer's rows go in chunks through two pack buffers). --dense-bcast
// broadcasts whole blocks around a pipelined ring (SANCUS as published;
// --native-bcast: MPI_Bcast, --chunk: the ring's chunk).
//
// # Fewer bits on the wire
//
// --wire fp32|bf16|int8|int4|int2|auto sets how forward blocks travel,
// --wire-grad gradient blocks (default: as --wire). An integer row is its
// offset and step (two bf16 values) plus b-bit codes, rounded
// stochastically and keyed by (seed, epoch, layer, direction, original
// node id), so every receiver decodes the same values, the owner
// multiplies exactly what the others decode, and a run gives the same
// losses at any P and with either exchange. GAT's reduced gradients are
// the exception: a sender's sums over its targets depend on P, and are
// rounded keyed by the sender too. --wire auto --wire-error e lets
// each owner pick, per block and epoch, the fewest bits whose relative
// error stays under e. --wire-delta sends a refreshed root's change
// against the copy every rank holds. --wire-allreduce bf16 halves the
// weight-gradient allreduce, with error feedback. --cache-bits keeps the
// cached blocks, a rank's own too, in their wire bits, decoding a range of
// rows at a time where they are multiplied (same results, less memory;
// not with --wire-delta). Staleness decides
// whether a root sends, the width how much: a receiver's copy is off by
// the root's drift since its last send plus that send's quantization
// error (quant_error per epoch, wire_bits per layer in the results).
//
// # Models
//
// --model sage is GraphSAGE-mean as PyG's SAGEConv (h' = W·mean over
// neighbours + Root·h + b): Algorithm 3 over D⁻¹A forward, A with
// gradients pre-scaled by 1/deg backward. --model gat is GAT: --heads
// heads of --hidden features in hidden layers (concatenated, ELU),
// --out-heads in the output layer (averaged), --att-dropout on the
// coefficients, weight decay on every parameter. A row's softmax spans
// every rank's block: it is taken block by block as blocks arrive (online
// softmax), so Algorithm 3 is unchanged; a stale rank's nodes are attended
// with their cached features and scores. Its backward, with the sparse
// exchange, forms each peer's share of the gradient where the targets are
// and sends the sums back (reduce.go): [∂HW | ∂er] rows, not the targets'
// [G | el | lse | δ]. Multi-label data trains a sigmoid per class and
// reports micro-F1.
//
// # Cluster batches
//
// --batch clusters trains each step on the subgraph --clusters-per-step of
// the shards' clusters induce (prepare --clusters K), renormalized as
// Cluster-GCN does; every epoch is one pass over all clusters in an order
// drawn from (seed, epoch). Only the batch's rows travel. --boundary lets a
// batch's nodes read their neighbours outside it from the caches, with
// the whole graph's normalization. Evaluation stays full-graph. Pick it
// when a whole-graph step is too slow for the time you have; keep
// global-batch when an epoch is cheap.
//
// # Sampled mini-batches
//
// --batch sampled --fanouts 25,10 --batch-size B trains GCN, GraphSAGE or
// GAT as DistDGL does: each step every rank samples the k-hop neighbourhoods
// of its seeds, each vertex's neighbours drawn by the rank that owns its
// row, fetches the bottom layer's features from their owners (in
// --wire's width; one batched exchange per layer), computes its whole
// mini-batch alone on the per-layer blocks, and the gradients are summed
// once per step. --batch-draw local (the default) gives each rank B/P
// seeds from the training vertices it owns (a rank that runs out starts
// its permutation again, so all take the same steps); --batch-draw global
// splits one global batch of B evenly over the ranks, so the losses do not
// depend on P. A vertex keeps the k of its d neighbours with the smallest
// hash of (seed, step, layer, vertex, neighbour), original ids; a GCN's
// edges weigh Â·d/k (self loop kept), GraphSAGE's 1/k: at fanout ≥ the
// largest degree and B ≥ the training vertices a step is a full-graph step
// (TestFullFanoutBatchIsGlobalStep); a GAT's edges carry no weight, its
// softmax spanning the sampled neighbours. Dropout masks (and a GAT's
// attention dropout) are keyed as the engine's. Features travel as --wire says; in fp32 a sparse X (a bag of
// words) travels as its nonzeros and layer 1 multiplies them as they are.
// --sample-ahead (default) samples and fetches batch s+1 while
// batch s trains (ByteGNN's pipeline), the step's allreduce waiting for
// it: the same batches and losses. Evaluation is the full-graph pass; each
// epoch's row of the results holds its sampling figures (vertices, edges,
// feature rows read locally and fetched, bytes, seconds and seconds
// exposed per rank).
//
// # Moving the model
//
// --migrate model (HopGNN; with --batch-draw global) trains the same
// global batch with the model moving instead of the features: each seed
// is the root of a micrograph homed at the rank that owns it, and an
// iteration runs one time step per rank, replica d training at rank
// (d+t) mod P a share of that rank's home micrographs, then sending its
// weights and gradient accumulator (fp32) one rank on. The accumulators
// are summed at the end: the same weights as the features-move draw to
// 1e-5 (TestModelMoveTrainsAsFeaturesMove), other bytes. --pregather
// fetches a rank's rows of every time step in one exchange (fewer bytes,
// the same bits); --merge-micrographs K merges away the K time steps with
// the fewest roots (fewer hops, more rows fetched). A run whose model
// would move more bytes than the batch's features are expected to is
// refused, naming both. The result's sampling rows gain the model's and
// the features' bytes, the measured R_micro and each rank's micrographs
// per time step.
package train

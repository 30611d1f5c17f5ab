package train

// Sampled mini-batch training (DistDGL). Each step every rank samples the
// k-hop neighbourhoods of its seeds through their owners, fetches the
// bottom layer's features, and computes its whole mini-batch alone
// (src/sample, src/minibatch); the gradients are summed over ranks once per
// step and every rank takes the same Adam step. Evaluation stays the
// engine's full-graph pass, so accuracies are exact and comparable.
//
// Steps are numbered epoch·steps + s: they key the neighbour draws and
// the dropout masks, so a run repeats bit for bit and resumes as it ran.

import (
	"fmt"
	"math"
	"time"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/kernels/matrix"
	"sancus/src/minibatch"
	"sancus/src/result"
	"sancus/src/sample"
	"sancus/src/shard"
)

// sampledRun is what sampled training keeps from epoch to epoch.
type sampledRun struct {
	s     *sample.Sampler
	train sample.TrainSet
	last  *result.Sampling // the last epoch's figures, for its row
	// rowBytes is a fetched feature row's bytes (--migrate model's estimate).
	rowBytes float64
}

// setupSampled makes the sampler over this rank's rows: Â's row with its
// columns numbered globally, every row's original id and every rank's
// training vertices (allgathers).
func (e *Engine) setupSampled() (*sampledRun, error) {
	s := e.s
	switch {
	case s.Multi != nil:
		return nil, fmt.Errorf("--batch sampled trains single-label data: this dataset is multi-label; use --batch global or clusters")
	case s.N > math.MaxInt32:
		return nil, fmt.Errorf("--batch sampled numbers vertices in 32 bits: %d nodes are too many", s.N)
	case s.Features == nil:
		return nil, fmt.Errorf("rank %d: --batch sampled reads X, which the engine let go", e.rank)
	}
	var orig []int64 // every global row's original id (nil: the global id)
	reordered := int64(0)
	if e.part.ownIDs != nil {
		reordered = 1
	}
	flags, err := collectives.Allgather(e.c, []int64{reordered})
	if err != nil {
		return nil, fmt.Errorf("sampled set-up: %w", err)
	}
	if sum(flags) > 0 {
		mine := make([]int64, e.rows())
		for r := range mine {
			mine[r] = e.ownID(r)
		}
		counts := make([]int, e.P)
		for j := range counts {
			counts[j] = s.RowsOf(j)
		}
		orig = make([]int64, s.N)
		if err := collectives.Allgatherv(e.c, mine, orig, counts); err != nil {
			return nil, fmt.Errorf("sampled set-up: %w", err)
		}
	}
	global := func(id int64) int64 { return id } // the view's ids are original ids
	if orig != nil {
		inv := make([]int64, s.N)
		for g, o := range orig {
			inv[o] = int64(g)
		}
		global = func(id int64) int64 { return inv[id] }
	}
	adj := &matrix.CSR{Rows: e.rows(), Cols: s.N, RowPtr: make([]int64, e.rows()+1)}
	for r := range e.rows() {
		for j, blk := range e.view.blocks {
			for p := blk.RowPtr[r]; p < blk.RowPtr[r+1]; p++ {
				adj.ColIdx = append(adj.ColIdx, int32(global(e.srcID(j, int(blk.ColIdx[p])))))
				adj.Val = append(adj.Val, blk.Val[p])
			}
		}
		adj.RowPtr[r+1] = int64(len(adj.ColIdx))
	}
	weights := shard.Sym
	if e.plan.Model.Arch.HasRoot() {
		weights = shard.Mean
	}
	// fp32 rows travel as their nonzeros where fewer than half are (8
	// bytes a nonzero against 4 a value): X's density over every rank.
	nnz, err := collectives.Allgather(e.c, []int64{s.Features.NNZ()})
	if err != nil {
		return nil, fmt.Errorf("sampled set-up: %w", err)
	}
	sparse := e.plan.Wire.Fwd == wire.FP32 && 2*sum(nnz) < int64(s.N)*int64(s.FeatDim)
	smp, err := sample.New(e.c, sample.Graph{Rank: e.rank, Offsets: s.Offsets, Adj: adj, Orig: orig, Features: s.Features, Labels: s.Labels},
		sample.Options{Fanouts: e.plan.Batch.Fanouts, Weights: weights, Seed: e.plan.Optim.Seed, Wire: e.plan.Wire.Fwd, Sparse: sparse})
	if err != nil {
		return nil, err
	}
	rowBytes := float64(wire.RowBytes(e.plan.Wire.Fwd.Or(wire.FP32).Bits(), s.FeatDim))
	if sparse {
		rowBytes = 8 * (1 + float64(sum(nnz))/float64(s.N))
	}
	if e.plan.Batch.Migrate.Model() {
		if err := e.migrateCheck(); err != nil {
			return nil, err
		}
	}
	mine := make([]int64, len(s.Train))
	for i, r := range s.Train {
		mine[i] = int64(s.Row0()) + int64(r)
	}
	n, err := collectives.Allgather(e.c, []int64{int64(len(mine))})
	if err != nil {
		return nil, fmt.Errorf("sampled set-up: %w", err)
	}
	counts := make([]int, e.P)
	for j, c := range n {
		counts[j] = int(c)
	}
	all := make([]int64, sum(n))
	if err := collectives.Allgatherv(e.c, mine, all, counts); err != nil {
		return nil, fmt.Errorf("sampled set-up: %w", err)
	}
	ts := sample.TrainSet{ByRank: make([][]int64, e.P)}
	for j, off := 0, 0; j < e.P; j++ {
		ts.ByRank[j], off = all[off:off+counts[j]], off+counts[j]
	}
	if orig != nil {
		ts.Orig = func(g int64) int64 { return orig[g] }
	}
	return &sampledRun{s: smp, train: ts, rowBytes: rowBytes}, nil
}

// sampledEpoch trains one epoch of sampled mini-batches and returns the
// epoch's summed training loss, scaled to every training vertex counting
// once (the curve's loss is the mean over the epoch's seeds).
//
// With Batch.Prefetch (ByteGNN's pipeline) batch s+1 is sampled and
// fetched in a goroutine while batch s is computed; the step's gradient
// allreduce waits for it, so only one goroutine at a time talks over the
// communicator, and every rank issues its collectives in one order. The
// draws are keyed by step: the batches, and the run, are the same either
// way. What the training waits for is the epoch's exposed sampling time.
func (e *Engine) sampledEpoch(ep int, r *runState) (float64, error) {
	if r.sampled == nil {
		var err error
		if r.sampled, err = e.setupSampled(); err != nil {
			return 0, err
		}
	}
	sr, b := r.sampled, e.plan.Batch
	sr.last = nil // this epoch's figures, once it has them: never the last epoch's
	if b.Migrate.Model() {
		return e.migrateEpoch(ep, r)
	}
	draw := sr.train.Draw(b.Draw, b.Size, e.plan.Optim.Seed, ep, e.rank)
	steps := len(draw.Mine)
	id := func(s int) uint64 { return uint64(ep*steps + s) }
	type sampled struct {
		b   *sample.Batch
		err error
	}
	take := func(s int) sampled {
		bt, err := sr.s.Sample(id(s), draw.Mine[s])
		if err != nil {
			err = fmt.Errorf("epoch %d step %d: %w", ep+1, s+1, err)
		}
		return sampled{bt, err}
	}
	fig := epochFigures{counts: make([]int64, sampledFields*steps)}
	var lossSum float64
	var seeds int
	t0 := time.Now()
	cur := take(0)
	fig.exposed += time.Since(t0)
	for s := range steps {
		if cur.err != nil {
			return lossSum, cur.err
		}
		var ahead chan sampled
		if b.Prefetch && s+1 < steps {
			ahead = make(chan sampled, 1)
			go func() { ahead <- take(s + 1) }()
		}
		c := cur.b.Counts
		copy(fig.counts[sampledFields*s:], []int64{int64(len(draw.Mine[s])), c.Vertices, c.Edges, c.LocalRows, c.RemoteRows, c.BytesSent, c.FeatureBytes})
		fig.seconds += c.Seconds
		loss, grads, err := minibatch.Step(e.m, cur.b, float64(draw.Total[s]), e.stepDropout(id(s)))
		// The next batch is in before anything else travels.
		t := time.Now()
		switch {
		case ahead != nil:
			cur = <-ahead
		case s+1 < steps && err == nil:
			cur = take(s + 1)
		}
		fig.exposed += time.Since(t)
		if err != nil {
			return lossSum, fmt.Errorf("rank %d, epoch %d step %d: %w", e.rank, ep+1, s+1, err)
		}
		lossSum, seeds = lossSum+loss, seeds+draw.Total[s]
		if err := e.sampledStep(ep, grads); err != nil { // the loss so far, on the scale of an epoch's
			return lossSum * float64(e.s.GlobalTrain) / float64(max(1, seeds)), err
		}
	}
	if err := e.sampledFigures(r, fig); err != nil {
		return lossSum, err
	}
	return lossSum * float64(e.s.GlobalTrain) / float64(max(1, seeds)), nil
}

// stepDropout is sampled step id's dropout: the engine's probabilities
// (a GAT's attention dropout included) and seed, keyed by the step.
func (e *Engine) stepDropout(id uint64) minibatch.Dropout {
	d := minibatch.Dropout{P: float32(e.plan.Model.Dropout), Seed: e.plan.Optim.Seed, Step: id}
	if e.plan.Model.Arch.Attends() {
		d.Att = e.attDropout()
	}
	return d
}

// sampledFields are the counts kept per step: seeds, vertices, edges,
// feature rows read locally and fetched, bytes, of them the features'.
const sampledFields = 7

// epochFigures are one rank's sampling figures of an epoch.
type epochFigures struct {
	counts  []int64 // sampledFields per step
	seconds float64 // sampling and fetching, wherever it ran
	exposed time.Duration
}

// sampledUpdate sums a step's gradients over ranks, adds weight decay and
// takes the Adam step, as the engine's step does; it returns what went
// non-finite ("": nothing).
func (e *Engine) sampledUpdate(grads []float32) (string, error) {
	g := e.ar.grads
	copy(g, grads)
	start := time.Now()
	if err := e.allreduce(g); err != nil {
		return "", fmt.Errorf("gradient allreduce: %w", err)
	}
	e.tally.clock.comm += time.Since(start)
	e.tally.clock.wait += time.Since(start)
	e.decay(g)
	if what := e.nonFinite("gradient", func(off int, t []float32) []float32 { return g[off : off+len(t)] }); what != "" {
		return what, nil
	}
	e.opt.Update(e.m.Flat(), g)
	return e.nonFinite("weights after the update", func(_ int, t []float32) []float32 { return t }), nil
}

// sampledStep takes a sampled step's summed gradients: the update, or the
// divergence it found (every rank finds the same).
func (e *Engine) sampledStep(ep int, grads []float32) error {
	what, err := e.sampledUpdate(grads)
	if err != nil {
		return err
	}
	if what != "" {
		return &divergence{epoch: ep + 1, what: what}
	}
	return nil
}

// sampledFigures gathers every rank's figures of the epoch into
// r.sampled.last.
func (e *Engine) sampledFigures(r *runState, f epochFigures) error {
	all, err := collectives.Allgather(e.c, f.counts)
	if err != nil {
		return fmt.Errorf("sampling figures: %w", err)
	}
	secs, err := collectives.Allgather(e.c, []float64{f.seconds, f.exposed.Seconds()})
	if err != nil {
		return fmt.Errorf("sampling figures: %w", err)
	}
	n := len(f.counts)
	steps := n / sampledFields
	out := &result.Sampling{Steps: steps, Batches: make([]result.SampledCounts, steps), RankBytes: make([]int64, e.P),
		RankSeconds: make([]float64, e.P), RankExposed: make([]float64, e.P)}
	for rank := range e.P {
		out.RankSeconds[rank], out.RankExposed[rank] = secs[2*rank], secs[2*rank+1]
		mine := all[rank*n : (rank+1)*n]
		for s := range steps {
			v := mine[sampledFields*s : sampledFields*(s+1)]
			c := result.SampledCounts{Seeds: v[0], Vertices: v[1], Edges: v[2], FeaturesLocal: v[3], FeaturesRemote: v[4], Bytes: v[5], FeatureBytes: v[6]}
			out.Batches[s].Add(c)
			out.SampledCounts.Add(c)
			out.RankBytes[rank] += c.Bytes
		}
	}
	r.sampled.last = out
	return nil
}

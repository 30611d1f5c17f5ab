package train

// Model migration (HopGNN): the model moves to the features. Each
// iteration trains the global batch of --batch-draw global, every seed the
// root of a micrograph homed at the rank that owns it. The iteration runs
// in time steps, one per rank: at time step t replica d sits on rank
// (d+t) mod P and trains a 1/P share of that rank's home micrographs, so
// each replica visits every rank and every micrograph is trained once.
// Between time steps every rank sends the replica it holds to the next
// rank of the ring and receives the previous one's; at the end the
// accumulators are summed over ranks and every rank takes the same Adam
// step. The replicas start every iteration equal, so the sum is the
// features-move mode's over the same micrographs (the draws and dropout
// masks are keyed by step and original ids): the same weights, other
// bytes. The optimizer's moments, equal on every rank, stay put.
//
// Within an iteration every replica's weights are those every rank holds,
// so a hop carries only the gradient accumulator (fp32), and it travels
// while the next time step computes its gradients with the weights here:
// the arriving accumulator is needed only to add them to.
//
// An iteration whose model would move more bytes than the features it
// saves falls back: every rank trains its slice of the global batch,
// fetching the features, as --migrate features does (the same weights
// again). The choice is made per iteration before it is sampled, from its
// roots, as HopGNN §5.3 estimates a time step's vertices by its roots.
//
// Merging (§5.3) removes the time step with the fewest roots, dealing its
// micrographs evenly over the same replica's other time steps (trained
// away from home: fewer hops, more features fetched); pre-gathering
// (§5.2) fetches a rank's rows of every time step in one exchange.
// --merge-micrographs auto is §5.3's examination period: each epoch from
// the second merges one more time step while the epoch gets faster.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"sancus/collectives"
	"sancus/src/minibatch"
	"sancus/src/result"
	"sancus/src/sample"
)

// Migrate is what moves in sampled training, parsed once from a flag or a
// configuration.
type Migrate uint8

const (
	MigrateFeatures Migrate = iota // features come to the model (DistDGL)
	MigrateModel                   // the model goes to the features (HopGNN)
)

var migrateNames = [...]string{MigrateFeatures: "features", MigrateModel: "model"}

// ParseMigrate reads what moves: features (also "") or model.
func ParseMigrate(s string) (Migrate, error) {
	if s == "" {
		return MigrateFeatures, nil
	}
	for m, name := range migrateNames {
		if s == name {
			return Migrate(m), nil
		}
	}
	return MigrateFeatures, fmt.Errorf("unknown migrate %q (features or model)", s)
}

func (m Migrate) String() string {
	if int(m) < len(migrateNames) {
		return migrateNames[m]
	}
	return fmt.Sprintf("Migrate(%d)", uint8(m))
}

// MarshalText writes the choice's name.
func (m Migrate) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a choice's name.
func (m *Migrate) UnmarshalText(b []byte) (err error) {
	*m, err = ParseMigrate(string(b))
	return err
}

// Set and Type make a Migrate a command-line flag.
func (m *Migrate) Set(s string) error { return m.UnmarshalText([]byte(s)) }
func (m Migrate) Type() string        { return "migrate" }

// Model: the model hops around the ranks to the micrographs' homes.
func (m Migrate) Model() bool { return m == MigrateModel }

// Merging is --merge-micrographs, parsed once: a fixed number of time
// steps merged away every iteration (0, the default: none), or MergeAuto,
// HopGNN §5.3's examination period. Auto follows the epochs' measured
// times, so two runs may merge differently: their weights agree to
// rounding, not bit for bit, while a fixed count repeats bit for bit.
type Merging int

// MergeAuto: merge one more time step each epoch from the second while
// the epoch's training gets faster, then keep the last count that did.
const MergeAuto Merging = -1

// ParseMerging reads auto or a count of time steps (also "": 0).
func ParseMerging(s string) (Merging, error) {
	switch s {
	case "":
		return 0, nil
	case "auto":
		return MergeAuto, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("unknown merging %q (auto or a count of time steps ≥ 0)", s)
	}
	return Merging(n), nil
}

func (m Merging) String() string {
	if m == MergeAuto {
		return "auto"
	}
	return strconv.Itoa(int(m))
}

// MarshalJSON writes a count as a number (as the setting always was) and
// auto as a string.
func (m Merging) MarshalJSON() ([]byte, error) {
	if m == MergeAuto {
		return []byte(`"auto"`), nil
	}
	return []byte(strconv.Itoa(int(m))), nil
}

// UnmarshalJSON reads either.
func (m *Merging) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		s = string(b)
	}
	v, err := ParseMerging(s)
	*m = v
	return err
}

// Set and Type make a Merging a command-line flag.
func (m *Merging) Set(s string) (err error) { *m, err = ParseMerging(s); return err }
func (m Merging) Type() string              { return "merging" }

// Auto: §5.3's examination chooses the count epoch by epoch.
func (m Merging) Auto() bool { return m == MergeAuto }

// autoMerge is §5.3's examination period: given the agreed training
// seconds of the epochs so far, each run at the count this rule chose for
// it, the time steps the next epoch merges away. The first epoch merges
// none; each later one tries one more than the last kept count, kept
// while its epoch ran faster than the epoch before; the first that did
// not, or reaching most, ends the examination and the kept count stays.
func autoMerge(secs []float64, most int) int {
	kept := 0
	for k := 1; k < len(secs); k++ {
		if !(secs[k] < secs[k-1]) {
			return kept
		}
		if kept++; kept >= most {
			return most
		}
	}
	if len(secs) == 0 {
		return 0
	}
	return min(kept+1, most)
}

const tagMigrate = collectives.TagUser + 3

// schedule is one iteration's plan: work[d][t] are the roots replica d
// trains at time step t (on rank (d+t) mod P), and steps the time steps
// kept, ascending.
type schedule struct {
	work  [][][]int64
	steps []int
}

// plan splits batch (global ids) into the micrographs each replica trains
// at each time step and merges away merge time steps.
func plan(batch []int64, p, merge int, owner func(int64) int) schedule {
	home := make([][]int64, p)
	for _, v := range batch {
		home[owner(v)] = append(home[owner(v)], v)
	}
	sc := schedule{work: make([][][]int64, p)}
	for d := range p {
		sc.work[d] = make([][]int64, p)
	}
	for h, vs := range home {
		for t := range p { // rank h's t-th share goes to time step t
			sc.work[(h-t+p)%p][t] = vs[len(vs)*t/p : len(vs)*(t+1)/p]
		}
	}
	for t := range p {
		sc.steps = append(sc.steps, t)
	}
	for range merge {
		// The time step with the fewest roots goes (the first of equals).
		low, lowN := 0, -1
		for k, t := range sc.steps {
			n := 0
			for d := range p {
				n += len(sc.work[d][t])
			}
			if lowN < 0 || n < lowN {
				low, lowN = k, n
			}
		}
		t := sc.steps[low]
		sc.steps = append(sc.steps[:low:low], sc.steps[low+1:]...)
		for d := range p {
			vs, n := sc.work[d][t], len(sc.steps)
			for i, u := range sc.steps {
				sc.work[d][u] = append(sc.work[d][u][:len(sc.work[d][u]):len(sc.work[d][u])], vs[len(vs)*i/n:len(vs)*(i+1)/n]...)
			}
			sc.work[d][t] = nil
		}
	}
	return sc
}

// migrateCheck refuses a fixed merging that leaves no time step.
func (e *Engine) migrateCheck() error {
	if m := e.plan.Batch.Merge; !m.Auto() && int(m) >= e.P {
		return fmt.Errorf("--merge-micrographs %d: at most %d at P = %d (one time step must stay)", m, e.P-1, e.P)
	}
	return nil
}

// migrateBytes estimates an iteration of roots micrographs before it is
// sampled: the bytes of model it moves in hops time steps (every
// replica's gradient accumulator at every hop) and of the features that
// fetching them instead would move (each root's k-hop neighbourhood, at
// most every vertex, (P-1)/P of its rows remote, rowBytes each).
func (e *Engine) migrateBytes(roots, hops int, rowBytes float64) (model, feats float64) {
	p := e.P
	model = float64(p*hops) * 4 * float64(e.m.NumParams())
	rows := float64(roots)
	for _, k := range e.plan.Batch.Fanouts {
		rows *= float64(1 + k)
	}
	rows = min(rows, float64(e.s.N))
	return model, rows * float64(p-1) / float64(p) * rowBytes
}

// merging is the time steps this epoch merges away: the fixed count, or
// auto's choice from the epochs so far (their agreed seconds are in the
// curve, which a checkpoint keeps: a resumed run goes on choosing as it
// would have).
func (e *Engine) merging(curve []result.Epoch) int {
	m := e.plan.Batch.Merge
	if !m.Auto() {
		return int(m)
	}
	secs := make([]float64, 0, len(curve))
	for _, row := range curve {
		if row.Sampling == nil || row.Sampling.Migration == nil {
			break
		}
		secs = append(secs, row.Sampling.Migration.Seconds)
	}
	return autoMerge(secs, e.P-1)
}

// migrateEpoch trains one epoch with the model moving (see above) and
// returns the epoch's loss as sampledEpoch does.
func (e *Engine) migrateEpoch(ep int, r *runState) (float64, error) {
	start := time.Now()
	sr, b, p := r.sampled, e.plan.Batch, e.P
	glob := sr.train.Global(b.Size, e.plan.Optim.Seed, ep)
	// A fallen-back iteration's slice: the features-move global draw's.
	draw := sr.train.Draw(sample.DrawGlobal, b.Size, e.plan.Optim.Seed, ep, e.rank)
	steps := len(glob.Mine)
	n := e.m.NumParams()
	acc, in := make([]float32, n), make([]float32, n)
	merge := e.merging(r.res.Curve)
	ts := p - merge
	mig := &result.Migration{Pregather: b.Pregather, TimeSteps: ts,
		RankStepRoots: [][]int64{make([]int64, ts)}, RankStepVertices: [][]int64{make([]int64, ts)}}
	fig := epochFigures{counts: make([]int64, sampledFields*steps)}
	var lossSum float64
	var seeds int
	for s := range steps {
		id := uint64(ep*steps + s)
		drop := e.stepDropout(id)
		sc := plan(glob.Mine[s], p, merge, sr.s.Owner)
		var c sample.Counts
		roots := 0
		if model, feats := e.migrateBytes(glob.Total[s], len(sc.steps)-1, sr.rowBytes); model > feats {
			bt, err := sr.s.Sample(id, draw.Mine[s])
			if err != nil {
				return lossSum, fmt.Errorf("epoch %d step %d: %w", ep+1, s+1, err)
			}
			loss, grads, err := minibatch.Step(e.m, bt, float64(draw.Total[s]), drop)
			if err != nil {
				return lossSum, fmt.Errorf("rank %d, epoch %d step %d: %w", e.rank, ep+1, s+1, err)
			}
			copy(acc, grads)
			lossSum += loss
			c, roots = bt.Counts, len(draw.Mine[s])
			mig.Fallback++
		} else {
			mine := make([][]int64, len(sc.steps))
			for k, t := range sc.steps {
				mine[k] = sc.work[(e.rank-t+p)%p][t]
				roots += len(mine[k])
			}
			batches, err := sr.s.SampleSteps(id, mine, b.Pregather)
			if err != nil {
				return lossSum, fmt.Errorf("epoch %d step %d: %w", ep+1, s+1, err)
			}
			clear(acc)
			var moving *hop // the accumulator of the replica coming here
			for k, bt := range batches {
				loss, grads, err := minibatch.Step(e.m, bt, float64(glob.Total[s]), drop)
				if err == nil && moving != nil {
					err = moving.wait(e, mig)
					acc, in = in, acc
				}
				if err != nil {
					return lossSum, fmt.Errorf("rank %d, epoch %d step %d: %w", e.rank, ep+1, s+1, err)
				}
				for i, g := range grads {
					acc[i] += g
				}
				if moving = nil; k+1 < len(batches) {
					if moving, err = e.startHop(sc.steps[k+1]-sc.steps[k], acc, in); err != nil {
						return lossSum, fmt.Errorf("epoch %d step %d: %w", ep+1, s+1, err)
					}
				}
				lossSum += loss
				c.Add(bt.Counts)
				co, nr := sr.s.Locality(bt)
				mig.Colocated, mig.NonRoot = mig.Colocated+co, mig.NonRoot+nr
				mig.RankStepRoots[0][k] += int64(len(mine[k]))
				mig.RankStepVertices[0][k] += bt.Counts.Vertices
			}
		}
		seeds += glob.Total[s]
		copy(fig.counts[sampledFields*s:], []int64{int64(roots), c.Vertices, c.Edges, c.LocalRows, c.RemoteRows, c.BytesSent, c.FeatureBytes})
		fig.seconds += c.Seconds
		fig.exposed += time.Duration(c.Seconds * float64(time.Second))
		if err := e.sampledStep(ep, acc); err != nil { // the loss so far, on the scale of an epoch's
			return lossSum * float64(e.s.GlobalTrain) / float64(max(1, seeds)), err
		}
	}
	mig.Seconds = time.Since(start).Seconds()
	if err := e.sampledFigures(r, fig); err != nil {
		return lossSum, err
	}
	if err := e.migrationFigures(r.sampled.last, mig); err != nil {
		return lossSum, err
	}
	return lossSum * float64(e.s.GlobalTrain) / float64(max(1, seeds)), nil
}

// hop is a replica's accumulator on its way along the ring.
type hop struct {
	rq, sq collectives.Request
	bytes  int64
	start  time.Time
}

// startHop sends the accumulator acc gap ranks on along the ring and
// receives the one from gap ranks back into in; neither may be touched
// before wait.
func (e *Engine) startHop(gap int, acc, in []float32) (*hop, error) {
	h := &hop{bytes: int64(4 * len(acc)), start: time.Now()}
	to, from := (e.rank+gap)%e.P, (e.rank-gap+e.P)%e.P
	var err error
	if h.rq, err = e.c.Irecv(collectives.Bytes(in), from, tagMigrate); err != nil {
		return nil, fmt.Errorf("model migration: %w", err)
	}
	if h.sq, err = e.c.Isend(collectives.Bytes(acc), to, tagMigrate); err != nil {
		h.rq.Wait()
		return nil, fmt.Errorf("model migration: %w", err)
	}
	return h, nil
}

// wait finishes the hop: the received accumulator is in startHop's in.
// Only the wait counts as the hop's time; the compute it overlapped does
// not.
func (h *hop) wait(e *Engine, mig *result.Migration) error {
	t := time.Now()
	if err := collectives.WaitAll([]collectives.Request{h.sq, h.rq}); err != nil {
		return fmt.Errorf("model migration: %w", err)
	}
	d := time.Since(t)
	e.c.Stats().Add("migrate_model", h.bytes, h.bytes, time.Since(h.start))
	e.tally.clock.comm += d
	e.tally.clock.wait += d
	mig.ModelBytes += h.bytes
	return nil
}

// migrationFigures sums every rank's migration figures into s.
func (e *Engine) migrationFigures(s *result.Sampling, m *result.Migration) error {
	// The slowest rank's seconds, in µs: every rank agrees on the epoch's time.
	local := append([]int64{m.ModelBytes, m.Colocated, m.NonRoot, int64(m.Seconds * 1e6)}, m.RankStepRoots[0]...)
	local = append(local, m.RankStepVertices[0]...)
	all, err := collectives.Allgather(e.c, local)
	if err != nil {
		return fmt.Errorf("migration figures: %w", err)
	}
	w, ts := len(local), m.TimeSteps
	out := &result.Migration{TimeSteps: ts, Pregather: m.Pregather, Merged: e.P - ts, Fallback: m.Fallback, FeatureBytes: s.FeatureBytes,
		RankStepRoots: make([][]int64, e.P), RankStepVertices: make([][]int64, e.P)}
	for rank := range e.P {
		v := all[rank*w : (rank+1)*w]
		out.ModelBytes, out.Colocated, out.NonRoot = out.ModelBytes+v[0], out.Colocated+v[1], out.NonRoot+v[2]
		out.Seconds = max(out.Seconds, float64(v[3])/1e6)
		out.RankStepRoots[rank], out.RankStepVertices[rank] = v[4:4+ts], v[4+ts:4+2*ts]
	}
	if out.NonRoot > 0 {
		out.RMicro = float64(out.Colocated) / float64(out.NonRoot)
	}
	s.Migration = out
	return nil
}

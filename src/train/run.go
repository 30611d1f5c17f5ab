package train

import (
	"sancus/launch"
	"sancus/src/result"
	"strings"

	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"sancus/collectives"
	"sancus/collectives/wire"
	"sancus/kernels"
	"sancus/kernels/matrix"
	"sancus/src/model"
)

// ErrDiverged is returned (wrapped, naming the epoch and what went
// non-finite or grew) when training diverged; the report is still valid.
var ErrDiverged = errors.New("training diverged")

// divergence says where an epoch diverged.
type divergence struct {
	epoch int
	what  string
}

func (d *divergence) Error() string     { return fmt.Sprintf("diverged at epoch %d: %s", d.epoch, d.what) }
func (d *divergence) Is(err error) bool { return err == ErrDiverged }

// Run trains for cfg.Optim.Epochs and returns the report (complete on every
// rank's own figures; PerRank gathered from all ranks).
func (e *Engine) Run() (*result.Result, error) {
	res := &result.Result{Ranks: e.P, Params: e.m.NumParams(), Dims: e.m.Dims, Heads: e.m.Heads, SIMD: kernels.SIMD(), Threads: kernels.Threads(), Device: e.be.Name(),
		Model: e.m.Arch().String(), Metric: "accuracy"}
	if e.s.Multi != nil {
		res.Metric = "micro-f1"
	}
	for _, L := range e.layers {
		res.LayerModes = append(res.LayerModes, L.kind())
		if L.base().fwd != nil {
			res.Policy = e.plan.policy.Name()
		}
	}
	start := time.Now()
	r := runState{res: res, best: -1}
	if err := e.resume(&r); err != nil {
		return nil, err
	}
	res.Status = "completed"
	if e.plan.Run.Training != nil {
		e.plan.Run.Training()
	}
	var ended error
	for ep := r.first; ep < e.plan.Optim.Epochs; ep++ {
		stop, err := e.epoch(ep, &r)
		if errors.Is(err, ErrDiverged) {
			res.Status, res.Error, ended = "diverged", err.Error(), err
			break
		}
		if err != nil {
			return nil, err
		}
		if stop {
			res.Stopped, res.Status, ended = true, "stopped", ErrStopped
			break
		}
	}
	res.TotalSec = time.Since(start).Seconds()
	if err := e.finish(&r); err != nil {
		return nil, err
	}
	return res, ended
}

// runState is what Run carries from epoch to epoch.
type runState struct {
	res           *result.Result
	best          float64 // best validation accuracy so far
	first         int     // first epoch to run (after a resume)
	compute, wait time.Duration
	evalSent      int64
	evalMsgs      int64
	step          map[string]kernels.Count // --profile-kernels: the training steps' bytes and flops by class
	ran           int                      // epochs this run has trained (not resumed ones)
	spentMs       float64                  // their training and evaluation milliseconds
	sampled       *sampledRun              // sampled mini-batches (sampled.go), set up at the first epoch
	// evalK is --eval-every auto's interval, fixed from the first epoch's
	// agreed byte counts (0: not yet).
	evalK int
}

// addStep adds one training step's counts, the difference of the
// snapshots taken around it (nil: not profiling).
func (r *runState) addStep(before, after map[string]kernels.Count) {
	if after == nil {
		return
	}
	if r.step == nil {
		r.step = map[string]kernels.Count{}
	}
	for k, c := range after {
		s := r.step[k]
		s.Bytes += c.Bytes - before[k].Bytes
		s.Flops += c.Flops - before[k].Flops
		r.step[k] = s
	}
}

// resume restores the latest committed checkpoint, when asked to, and
// always says what it did: which epoch it continues after, or why it
// starts from the beginning.
func (e *Engine) resume(r *runState) error {
	if !e.plan.Run.Resume {
		return nil
	}
	dir := e.plan.Run.CheckpointDir
	ep, err := LatestCheckpoint(dir)
	if err != nil {
		return err
	}
	if ep == 0 {
		e.notice("--resume: %s; starting from epoch 1", describeNoCheckpoint(dir, e.P))
		return nil
	}
	// Every rank reads and checks its file before any says it resumed.
	ck, err := e.loadCheckpoint(dir, ep)
	failed, comm := e.agree(err)
	switch {
	case comm != nil:
		return fmt.Errorf("resume: %w", comm)
	case failed != nil:
		return failed
	}
	if ck.Epoch > e.plan.Optim.Epochs {
		return fmt.Errorf("resume: %s holds a checkpoint after epoch %d, past --epochs %d: a run cannot go back; give --epochs %d or more", dir, ck.Epoch, e.plan.Optim.Epochs, ck.Epoch)
	}
	*r.res, r.best, r.first = ck.Result, ck.Best, ck.Epoch
	r.evalK = ck.Result.EvalInterval
	r.res.Checkpoint = ep
	if ck.Epoch == e.plan.Optim.Epochs {
		e.notice("resumed from %s after epoch %d, the last: nothing is left to train", dir, ep)
		return nil
	}
	e.notice("resumed from %s after epoch %d (the last complete checkpoint)", dir, ep)
	return nil
}

// agree makes one rank's failure every rank's: each rank's error text goes
// to every rank, and all return the same error (failed), naming each rank
// that failed and why; nil where every rank succeeded. comm is a failure
// to communicate.
func (e *Engine) agree(err error) (failed, comm error) {
	const room = 512 // bytes of each rank's message
	mine := make([]byte, room)
	if err != nil {
		text := err.Error()
		if text == "" {
			text = "failed"
		}
		copy(mine, text)
	}
	all := make([]byte, room*e.P)
	counts := make([]int, e.P)
	for r := range counts {
		counts[r] = room
	}
	if comm := collectives.Allgatherv(e.c, mine, all, counts); comm != nil {
		return nil, comm
	}
	var msgs []string
	for r := range e.P {
		text, _, _ := strings.Cut(string(all[r*room:(r+1)*room]), "\x00")
		if text != "" {
			if e.P > 1 {
				text = fmt.Sprintf("rank %d: %s", r, text)
			}
			msgs = append(msgs, text)
		}
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	return errors.New(strings.Join(msgs, "; ")), nil
}

// epoch runs training epoch ep (and its evaluation), agrees with the other
// ranks on the metrics and on whether to stop, records the curve and
// checkpoints. It reports whether a stop was requested.
func (e *Engine) epoch(ep int, r *runState) (bool, error) {
	stats := e.c.Stats()
	t0 := time.Now()
	e.tally.clock = clock{}
	sent0, msgs0, ops0 := stats.Total().BytesSent, stats.Total().Messages, stats.Snapshot()
	var lossSum float64
	var diverged error
	c0 := e.tally.timed.Snapshot()
	switch {
	case e.plan.Batch.Mode.Sampled():
		lossSum, diverged = e.sampledEpoch(ep, r)
	case e.batch != nil:
		lossSum, diverged = e.batchEpoch(ep)
	default:
		lossSum, diverged = e.trainStep(ep)
	}
	r.addStep(c0, e.tally.timed.Snapshot())
	if diverged != nil && !errors.Is(diverged, ErrDiverged) {
		return false, diverged
	}
	row := result.Epoch{Epoch: ep + 1, Ms: ms(time.Since(t0)), BytesSent: stats.Total().BytesSent - sent0, Messages: stats.Total().Messages - msgs0}
	by := byPurpose(ops0, stats.Snapshot())
	row.ExchangeBytes, row.AllreduceBytes = by[forExchange], by[forAllreduce]
	r.compute += time.Since(t0) - e.tally.clock.wait
	r.wait += e.tally.clock.wait
	for _, id := range e.steps(ep) {
		s, k := e.countBroadcasts(id)
		row.Sent, row.Skipped = row.Sent+s, row.Skipped+k
	}
	if r.sampled != nil { // sampled steps broadcast no block
		row.Sent, row.Skipped, row.Sampling = 0, 0, r.sampled.last
	}
	m := metrics{lossSum: lossSum, train: float64(len(e.s.Train)), val: float64(len(e.s.Val)), test: float64(len(e.s.Test))}
	for _, id := range e.steps(ep) {
		s, n := e.quantErr(id)
		m.quantErr, m.quantN = m.quantErr+s, m.quantN+n
	}
	m.trainBytes = float64(row.BytesSent)
	if diverged == nil && e.plan.Run.EvalEvery.due(ep, e.plan.Optim.Epochs, r.evalK) {
		t1, s0, n0 := time.Now(), stats.Total().BytesSent, stats.Total().Messages
		if err := e.evaluate(ep, &m); err != nil {
			return false, err
		}
		r.evalSent += stats.Total().BytesSent - s0
		m.evalBytes = float64(stats.Total().BytesSent - s0)
		r.evalMsgs += stats.Total().Messages - n0
		row.EvalMs, row.Evaluated = ms(time.Since(t1)), true
	}
	if e.plan.Run.Stop != nil && e.plan.Run.Stop() {
		m.stop = 1
	}
	// The stop request rides on the metrics' sum, so every rank stops after
	// the same epoch even if the signal reached them apart.
	if err := e.sum(&m); err != nil {
		return false, fmt.Errorf("epoch %d metrics: %w", ep+1, err)
	}
	e.record(&row, m, r)
	if e.plan.Run.EvalEvery == EvalAuto && r.evalK == 0 && row.Evaluated { // the sums are every rank's: all fix the same k
		r.evalK = autoInterval(m.trainBytes, m.evalBytes)
		r.res.EvalInterval = r.evalK
	}
	if diverged == nil {
		diverged = e.lossDiverged(ep, r.res)
	}
	if diverged != nil { // every rank sees the same sums and gradients: all stop here
		e.notice("%v", diverged)
		return false, diverged
	}
	stop := m.stop > 0
	if e.plan.Run.CheckpointDir != "" && (stop || (e.plan.Run.CheckpointEvery > 0 && (ep+1)%e.plan.Run.CheckpointEvery == 0)) {
		if err := e.saveCheckpoint(e.plan.Run.CheckpointDir, ep+1, r.res, r.best); err != nil {
			return false, err
		}
	}
	return stop, nil
}

// trainStep is one forward, backward and update; it returns this rank's
// summed training loss. A non-finite gradient or weight is a divergence
// (the update is not applied, so the weights stay the last finite ones).
func (e *Engine) trainStep(ep int) (float64, error) {
	logits, err := e.forward(ep, true)
	if err != nil {
		return 0, err
	}
	var lossSum float64
	var g *matrix.Dense // ∂loss/∂logits
	if e.s.Multi != nil {
		lossSum = e.bceLossGrad(logits) // makes e.out.lossGrad (lossGradBuf)
		g = e.out.lossGrad
	} else {
		rows, n := e.trainRows()
		if ro := e.rowsAt(len(e.layers) - 1); ro != nil {
			// Written over the logits, which nothing reads after the loss,
			// so no rows × classes buffer is held for it. The other rows
			// must be zero, as ∂loss/∂logits is there (the clip's norm
			// reads them): the training pass wrote only these rows, so
			// they are, unless a pass that writes every row ran since the
			// last loss (logitsAll, step.go).
			if e.out.all {
				if err := ro.ZeroOtherRows(logits, e.out.rows); err != nil {
					return 0, err
				}
				e.out.all = false
			}
			lossSum, g = ro.LossGradRows(logits, e.s.Labels, e.out.rows, float64(n), logits), logits
		} else {
			g = e.lossGradBuf()
			lossSum = e.be.LossGrad(logits, e.s.Labels, rows, float64(n), g)
		}
	}
	if err := e.backward(ep, g); err != nil {
		return 0, err
	}
	what, err := e.step()
	if what != "" {
		return lossSum, &divergence{epoch: ep + 1, what: what}
	}
	return lossSum, err
}

// lossGradBuf is where the loss leaves ∂loss/∂logits when it cannot write
// it over the logits (every row is computed, or the loss is multi-label).
func (e *Engine) lossGradBuf() *matrix.Dense {
	if e.out.lossGrad == nil {
		e.out.lossGrad = e.be.NewDense(e.rows(), e.s.Classes)
	}
	return e.out.lossGrad
}

// lossDiverged checks the epoch's summed loss (the same on every rank):
// non-finite, or grown past MaxLossGrowth times the first epoch's.
func (e *Engine) lossDiverged(ep int, res *result.Result) error {
	loss := res.Curve[len(res.Curve)-1].Loss
	switch first := res.Curve[0].Loss; {
	case math.IsNaN(loss) || math.IsInf(loss, 0):
		return &divergence{epoch: ep + 1, what: fmt.Sprintf("the training loss is %v", loss)}
	case e.plan.Optim.MaxLossGrowth > 0 && first > 0 && loss > e.plan.Optim.MaxLossGrowth*first:
		return &divergence{epoch: ep + 1, what: fmt.Sprintf("the training loss %.4g grew past %g× the first epoch's %.4g (--max-loss-growth)", loss, e.plan.Optim.MaxLossGrowth, first)}
	}
	return nil
}

// metrics are one rank's sums for an epoch, added over ranks by sum.
type metrics struct {
	lossSum, trainOK, valOK, testOK, valLoss float64
	train, val, test                         float64    // split sizes
	stop                                     float64    // a stop was requested
	quantErr, quantN                         float64    // summed relative errors of encoded blocks
	f1                                       [9]float64 // multi-label: tp, fp, fn of train, val, test
	trainBytes, evalBytes                    float64    // this epoch's bytes sent training and evaluating
}

// fields are m's figures, each summed over the ranks by name.
func (m *metrics) fields() []*float64 {
	f := []*float64{&m.lossSum, &m.trainOK, &m.valOK, &m.testOK, &m.valLoss, &m.train, &m.val, &m.test,
		&m.stop, &m.quantErr, &m.quantN, &m.trainBytes, &m.evalBytes}
	for i := range m.f1 {
		f = append(f, &m.f1[i])
	}
	return f
}

// evaluate runs the fresh, dropout-free forward pass and counts this rank's
// correct predictions and validation loss.
func (e *Engine) evaluate(ep int, m *metrics) error {
	out, err := e.forward(ep, false)
	if err != nil {
		return err
	}
	e.be.Download(out)
	if e.s.Multi != nil {
		for k, set := range [][]int32{e.s.Train, e.s.Val, e.s.Test} {
			m.f1[3*k], m.f1[3*k+1], m.f1[3*k+2] = e.f1Counts(out, set)
		}
		m.valLoss = e.bceLoss(out, e.s.Val)
		return nil
	}
	m.trainOK = float64(model.Correct(out, e.s.Labels, e.s.Train))
	m.valOK = float64(model.Correct(out, e.s.Labels, e.s.Val))
	m.testOK = float64(model.Correct(out, e.s.Labels, e.s.Test))
	m.valLoss = model.SoftmaxCE(out, e.s.Labels, e.s.Val, 1, nil)
	return nil
}

// sum adds the metrics over ranks, in rank order, so every rank gets the
// same bits (float64: split sizes stay exact on graphs of any size).
func (e *Engine) sum(m *metrics) error {
	fields := m.fields()
	mine := make([]float64, len(fields))
	for i, f := range fields {
		mine[i] = *f
	}
	all, err := collectives.Allgather(e.c, mine)
	if err != nil {
		return err
	}
	for i, f := range fields {
		*f = 0
		for r := 0; r < e.P; r++ {
			*f += all[r*len(mine)+i]
		}
	}
	return nil
}

// record completes the epoch's row from the summed metrics, tracks the best
// validation epoch and appends the row to the curve.
func (e *Engine) record(row *result.Epoch, m metrics, r *runState) {
	res := r.res
	row.Loss = m.lossSum / float64(e.s.GlobalTrain)
	if m.quantN > 0 {
		row.QuantErr = m.quantErr / m.quantN
	}
	if row.Evaluated {
		row.TrainAcc, row.ValAcc, row.TestAcc = ratio(m.trainOK, m.train), ratio(m.valOK, m.val), ratio(m.testOK, m.test)
		if e.s.Multi != nil { // the same fields hold micro-F1 (Result.Metric says which)
			f := m.f1
			row.TrainAcc, row.ValAcc, row.TestAcc = microF1(f[0], f[1], f[2]), microF1(f[3], f[4], f[5]), microF1(f[6], f[7], f[8])
		}
		row.ValLoss = m.valLoss / math.Max(1, m.val)
		if row.ValAcc > r.best {
			r.best = row.ValAcc
			res.BestEpoch, res.BestValAcc, res.TestAtBest = row.Epoch, row.ValAcc, row.TestAcc
			e.keepBest()
		}
		res.FinalTestAcc = row.TestAcc
	}
	res.FinalLoss = row.Loss
	if e.s.Multi != nil {
		row.Metric = "micro-F1"
	}
	res.Curve = append(res.Curve, *row)
	r.ran, r.spentMs = r.ran+1, r.spentMs+row.Ms+row.EvalMs
	line := epochLine(*row)
	if left := e.plan.Optim.Epochs - row.Epoch; left > 0 {
		eta := time.Duration(r.spentMs / float64(r.ran) * float64(left) * float64(time.Millisecond))
		line += "  eta " + eta.Round(time.Second).String()
	}
	e.logf("%s\n", line)
}

// finish fills the run-wide figures and gathers every rank's statistics.
func (e *Engine) finish(r *runState) error {
	res := r.res
	if n := len(res.Curve); n > 1 {
		var s float64
		for _, row := range res.Curve[1:] {
			s += row.Ms
		}
		res.MeanEpochMs = s / float64(n-1)
	} else if n == 1 {
		res.MeanEpochMs = res.Curve[0].Ms
	}
	res.Broadcasts = e.broadcastLog()
	res.WireBits = e.wireBits()
	res.Clipped = e.tally.clipped
	tot := e.c.Stats().Total()
	mine := result.RankStats{Rank: e.rank, Rows: e.rows(), ComputeSec: r.compute.Seconds(), CommSec: tot.Seconds, CommWaitSec: r.wait.Seconds(),
		BytesSent: tot.BytesSent - r.evalSent, BytesRecv: tot.BytesRecv, EvalBytesSent: r.evalSent, Messages: tot.Messages - r.evalMsgs, EvalMessages: r.evalMsgs, CacheBytes: e.cacheBytes(), CompulsoryMB: float64(e.compulsoryBytes()) / (1 << 20), Memory: e.memoryParts(), PeakRSSMB: launch.PeakRSSMB(), PssMB: launch.PssMB(), BaseRSSMB: e.plan.Run.BaseRSSMB}
	if e.tally.timed != nil {
		mine.KernelMs = map[string]float64{}
		mine.KernelMB = map[string]float64{}
		for k, d := range e.tally.timed.Times {
			mine.KernelMs[k] = ms(d)
		}
		mine.StepKernelMB, mine.StepKernelGFLOP = map[string]float64{}, map[string]float64{}
		for k, c := range e.tally.timed.Counts {
			mine.KernelMB[k] = float64(c.Bytes) / 1e6
		}
		var bytes int64 // summed as integers: the same total whatever the map's order
		for k, c := range r.step {
			bytes += c.Bytes
			mine.StepKernelMB[k], mine.StepKernelGFLOP[k] = float64(c.Bytes)/1e6, float64(c.Flops)/1e9
		}
		mine.StepMB = float64(bytes) / 1e6
	}
	var err error
	if res.PerRank, err = e.gatherRankStats(mine); err != nil {
		return err
	}
	var sum, slowest float64
	for _, r := range res.PerRank {
		sum += r.ComputeSec
		slowest = max(slowest, r.ComputeSec)
	}
	if sum > 0 {
		res.ComputeImbalance = slowest / (sum / float64(len(res.PerRank)))
	}
	return nil
}

// notice prints, on rank 0, what a user must see even with --quiet.
func (e *Engine) notice(format string, args ...any) {
	if e.rank != 0 {
		return
	}
	w := e.plan.Run.Notices
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, "sancus: "+format+"\n", args...)
}

// logf prints a progress line on rank 0.
func (e *Engine) logf(format string, args ...any) {
	if e.plan.Run.Log != nil && e.rank == 0 {
		fmt.Fprintf(e.plan.Run.Log, format, args...)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// epochLine is the per-epoch log line.
func epochLine(r result.Epoch) string {
	s := fmt.Sprintf("epoch %4d  loss %.4f", r.Epoch, r.Loss)
	if r.Evaluated {
		s += fmt.Sprintf("  train %.4f  val %.4f  test %.4f", r.TrainAcc, r.ValAcc, r.TestAcc)
		if r.Metric != "" && r.Metric != "accuracy" {
			s += " (" + r.Metric + ")"
		}
	}
	s += fmt.Sprintf("  %7.2f ms", r.Ms)
	if r.Sent+r.Skipped > 0 {
		s += fmt.Sprintf("  blocks %d sent, %d not sent", r.Sent, r.Skipped)
	}
	if r.BytesSent > 0 {
		s += fmt.Sprintf("  sent %.2f MB: %.2f exchange, %.2f allreduce", float64(r.BytesSent)/1e6, float64(r.ExchangeBytes)/1e6, float64(r.AllreduceBytes)/1e6)
	}
	if r.QuantErr > 0 {
		s += fmt.Sprintf("  quant err %.2f%%", 100*r.QuantErr)
	}
	if m := r.Sampling; m != nil {
		s += fmt.Sprintf("  %d steps: %d vertices sampled, feature rows %d local %d fetched, %.2f MB", m.Steps, m.Vertices, m.FeaturesLocal, m.FeaturesRemote, float64(m.Bytes)/1e6)
		if g := m.Migration; g != nil {
			s += fmt.Sprintf("; model moved %.2f MB in %d time steps, %d steps fell back to fetching features", float64(g.ModelBytes)/1e6, g.TimeSteps, g.Fallback)
		}
	}
	return s
}

// countBroadcasts counts forward roots that broadcast or were skipped in epoch ep.
// sentIn reports whether an ascending broadcast log holds step ep (found
// from the end: ep is recent).
func sentIn(log []int, ep int) bool {
	for k := len(log) - 1; k >= 0 && log[k] >= ep; k-- {
		if log[k] == ep {
			return true
		}
	}
	return false
}

func (e *Engine) countBroadcasts(ep int) (sent, skipped int) {
	for _, L := range e.layers {
		c := L.base().fwd
		if c == nil {
			continue
		}
		for _, eps := range c.log {
			if sentIn(eps, ep) {
				sent++
			} else {
				skipped++
			}
		}
	}
	return sent, skipped
}

func (e *Engine) broadcastLog() map[string]map[string][]int {
	out := map[string]map[string][]int{}
	for l, L := range e.layers {
		c := L.base().fwd
		if c == nil {
			continue
		}
		m := map[string][]int{}
		for j, eps := range c.log {
			m[strconv.Itoa(j)] = append([]int{}, eps...)
		}
		out[strconv.Itoa(l+1)] = m
	}
	return out
}

// quantErr sums the relative errors of this rank's forward blocks encoded
// in epoch ep, and counts them.
func (e *Engine) quantErr(ep int) (sum, n float64) {
	for _, L := range e.layers {
		c := L.base().fwd
		if c == nil || !c.quantized() || c.last[e.rank] != ep {
			continue
		}
		sum += c.wire.epochErr
		n++
	}
	return sum, n
}

// cacheBytes is what the training caches' copies of the blocks take
// (forward and gradient; evaluation's caches are float32 always).
func (e *Engine) cacheBytes() int64 {
	var n int64
	for _, L := range e.layers {
		for _, c := range []*cache{L.base().fwd, L.base().grad} {
			if c != nil {
				n += c.copyBytes()
			}
		}
	}
	return n
}

// wireBits is the mean width of every quantized cache's encodings.
func (e *Engine) wireBits() map[string]float64 {
	out := map[string]float64{}
	for l, L := range e.layers {
		for dir, c := range map[string]*cache{"forward": L.base().fwd, "gradient": L.base().grad} {
			if c != nil && c.quantized() && c.wire.sends > 0 {
				out[fmt.Sprintf("%d %s", l+1, dir)] = c.wire.bitsSum / float64(c.wire.sends)
			}
		}
		if x, ok := L.(reducer); ok {
			if r := x.reduced(); r != nil && r.bits != wire.FP32 && r.sends > 0 {
				out[fmt.Sprintf("%d gradient", l+1)] = float64(r.bits)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// rankInts and rankFloats are the RankStats fields every rank shares at
// the end of a run, each named by where it lives: the gather packs and
// unpacks them by these lists, not by position.
var (
	rankInts = []func(*result.RankStats) *int64{
		func(s *result.RankStats) *int64 { return &s.BytesSent },
		func(s *result.RankStats) *int64 { return &s.BytesRecv },
		func(s *result.RankStats) *int64 { return &s.EvalBytesSent },
		func(s *result.RankStats) *int64 { return &s.CacheBytes },
		func(s *result.RankStats) *int64 { return &s.Messages },
		func(s *result.RankStats) *int64 { return &s.EvalMessages },
	}
	rankFloats = []func(*result.RankStats) *float64{
		func(s *result.RankStats) *float64 { return &s.ComputeSec },
		func(s *result.RankStats) *float64 { return &s.CommSec },
		func(s *result.RankStats) *float64 { return &s.CommWaitSec },
		func(s *result.RankStats) *float64 { return &s.PeakRSSMB },
		func(s *result.RankStats) *float64 { return &s.CompulsoryMB },
		func(s *result.RankStats) *float64 { return &s.BaseRSSMB },
		func(s *result.RankStats) *float64 { return &s.PssMB },
		func(s *result.RankStats) *float64 { return &s.StepMB },
		func(s *result.RankStats) *float64 { return &s.Memory.GraphMB },
		func(s *result.RankStats) *float64 { return &s.Memory.ActivationsMB },
		func(s *result.RankStats) *float64 { return &s.Memory.CachesMB },
		func(s *result.RankStats) *float64 { return &s.Memory.EvalMB },
		func(s *result.RankStats) *float64 { return &s.Memory.ModelMB },
		func(s *result.RankStats) *float64 { return &s.Memory.OwnMB },
		func(s *result.RankStats) *float64 { return &s.Memory.ExchangeMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.GraphMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.OwnMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.ActivationsMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.CachesMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.EvalMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.ExchangeMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.ModelMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.WorkingMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.LoadMB },
		func(s *result.RankStats) *float64 { return &s.Memory.Estimate.PeakMB },
	}
	// kernelMaps are the per-kernel-class figures, shared class by class
	// (kernels.TimedClasses) where --profile-kernels made them.
	kernelMaps = []func(*result.RankStats) *map[string]float64{
		func(s *result.RankStats) *map[string]float64 { return &s.KernelMs },
		func(s *result.RankStats) *map[string]float64 { return &s.KernelMB },
		func(s *result.RankStats) *map[string]float64 { return &s.StepKernelMB },
		func(s *result.RankStats) *map[string]float64 { return &s.StepKernelGFLOP },
	}
)

// gatherRankStats shares every rank's figures.
func (e *Engine) gatherRankStats(mine result.RankStats) ([]result.RankStats, error) {
	out := make([]result.RankStats, e.P)
	for r := range out {
		out[r].Rank = r
	}
	rows, err := collectives.Allgather(e.c, []int64{int64(mine.Rows)})
	if err != nil {
		return nil, fmt.Errorf("gathering per-rank statistics: %w", err)
	}
	for r := range out {
		out[r].Rows = int(rows[r])
	}
	if err := gatherFields(e.c, &mine, rankInts, out); err != nil {
		return nil, err
	}
	if err := gatherFields(e.c, &mine, rankFloats, out); err != nil {
		return nil, err
	}
	if mine.KernelMs == nil { // every rank runs the same configuration
		return out, nil
	}
	var f []float64
	for _, m := range kernelMaps {
		for _, class := range kernels.TimedClasses {
			f = append(f, (*m(&mine))[class])
		}
	}
	all, err := collectives.Allgather(e.c, f)
	if err != nil {
		return nil, fmt.Errorf("gathering per-rank kernel figures: %w", err)
	}
	for r := range out {
		v := all[r*len(f):]
		for _, m := range kernelMaps {
			*m(&out[r]) = map[string]float64{}
			for _, class := range kernels.TimedClasses {
				(*m(&out[r]))[class], v = v[0], v[1:]
			}
		}
	}
	return out, nil
}

// gatherFields shares the named fields of every rank's stats into out.
func gatherFields[T int64 | float64](c collectives.Comm, mine *result.RankStats, fields []func(*result.RankStats) *T, out []result.RankStats) error {
	v := make([]T, len(fields))
	for i, f := range fields {
		v[i] = *f(mine)
	}
	all, err := collectives.Allgather(c, v)
	if err != nil {
		return fmt.Errorf("gathering per-rank statistics: %w", err)
	}
	for r := range out {
		for i, f := range fields {
			*f(&out[r]) = all[r*len(fields)+i]
		}
	}
	return nil
}

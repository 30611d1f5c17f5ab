package train

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"sancus/kernels"
	"sancus/src/model"
)

// Epoch is one line of the training curve.
type Epoch struct {
	Epoch     int     `json:"epoch"`
	Loss      float64 `json:"loss"`
	TrainAcc  float64 `json:"train_acc"`
	ValAcc    float64 `json:"val_acc"`
	TestAcc   float64 `json:"test_acc"`
	ValLoss   float64 `json:"val_loss"`
	Ms        float64 `json:"ms"`      // training step (forward, backward, update)
	EvalMs    float64 `json:"eval_ms"` // evaluation forward
	Sent      int     `json:"bcast_sent"`
	Skipped   int     `json:"bcast_skipped"`
	BytesSent int64   `json:"bytes_sent"` // this rank, training traffic only
	Evaluated bool    `json:"evaluated"`
}

// RankStats is one rank's share of the run (SANCUS Table 5).
type RankStats struct {
	Rank          int     `json:"rank"`
	Rows          int     `json:"rows"`
	ComputeSec    float64 `json:"compute_s"`
	CommSec       float64 `json:"comm_s"`      // time inside communication
	CommWaitSec   float64 `json:"comm_wait_s"` // communication not hidden behind compute
	BytesSent     int64   `json:"bytes_sent"`
	BytesRecv     int64   `json:"bytes_recv"`
	EvalBytesSent int64   `json:"eval_bytes_sent"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
}

// Result is what a run reports; rank 0 writes it as the results JSON.
type Result struct {
	Ranks        int                         `json:"ranks"`
	Policy       string                      `json:"policy"`
	LayerModes   []string                    `json:"layer_modes"`
	Curve        []Epoch                     `json:"curve"`
	BestEpoch    int                         `json:"best_epoch"`
	BestValAcc   float64                     `json:"best_val_acc"`
	TestAtBest   float64                     `json:"test_acc_at_best_val"`
	FinalTestAcc float64                     `json:"final_test_acc"`
	FinalLoss    float64                     `json:"final_loss"`
	MeanEpochMs  float64                     `json:"mean_epoch_ms"` // training step, epochs after the first
	TotalSec     float64                     `json:"total_s"`
	PerRank      []RankStats                 `json:"per_rank"`
	Broadcasts   map[string]map[string][]int `json:"broadcast_epochs"` // layer -> root -> epochs
	Clipped      int                         `json:"clipped_blocks"`
	Params       int                         `json:"params"`
	SIMD         string                      `json:"simd"`
	Threads      int                         `json:"threads"`
	Device       string                      `json:"device"`            // kernels backend
	Stopped      bool                        `json:"stopped,omitempty"` // ended early by a stop request
}

// Run trains for cfg.Epochs and returns the report (complete on every
// rank's own figures; PerRank gathered from all ranks).
func (e *Engine) Run() (*Result, error) {
	res := &Result{Ranks: e.P, Params: e.m.NumParams(), SIMD: kernels.SIMD(), Threads: kernels.Threads(), Device: e.be.Name()}
	for _, L := range e.layers {
		res.LayerModes = append(res.LayerModes, L.mode.String())
		if L.fwd != nil {
			res.Policy = L.fwd.policy.Name()
		}
	}
	start := time.Now()
	var compute, wait time.Duration
	var evalSent int64
	best := -1.0
	stats := e.c.Stats()
	first := 0
	if e.cfg.Resume {
		ep, err := LatestCheckpoint(e.cfg.CheckpointDir)
		if err != nil {
			return nil, err
		}
		if ep > 0 {
			ck, err := e.loadCheckpoint(e.cfg.CheckpointDir, ep)
			if err != nil {
				return nil, err
			}
			*res, best, first = ck.Result, ck.Best, ck.Epoch
			if e.cfg.Log != nil && e.rank == 0 {
				fmt.Fprintf(e.cfg.Log, "resumed from %s after epoch %d\n", e.cfg.CheckpointDir, ep)
			}
		}
	}
	for ep := first; ep < e.cfg.Epochs; ep++ {
		t0 := time.Now()
		e.clock = clock{}
		sent0 := stats.Total().BytesSent
		logits, err := e.forward(ep, true)
		if err != nil {
			return nil, err
		}
		lossSum := e.be.LossGrad(logits, e.s.Labels, e.s.Train, float64(e.s.GlobalTrain), e.lossGrad)
		if err := e.backward(ep, e.lossGrad); err != nil {
			return nil, err
		}
		if err := e.step(); err != nil {
			return nil, err
		}
		row := Epoch{Epoch: ep + 1, Ms: ms(time.Since(t0)), BytesSent: stats.Total().BytesSent - sent0}
		compute += time.Since(t0) - e.clock.wait
		wait += e.clock.wait
		row.Sent, row.Skipped = e.countBroadcasts(ep)

		evalEpoch := e.cfg.EvalEvery > 0 && ((ep+1)%e.cfg.EvalEvery == 0 || ep == e.cfg.Epochs-1)
		metrics := []float32{float32(lossSum), 0, 0, 0, 0}
		if evalEpoch {
			t1 := time.Now()
			s0 := stats.Total().BytesSent
			out, err := e.forward(ep, false)
			if err != nil {
				return nil, err
			}
			e.be.Download(out)
			metrics[1] = float32(model.Correct(out, e.s.Labels, e.s.Train))
			metrics[2] = float32(model.Correct(out, e.s.Labels, e.s.Val))
			metrics[3] = float32(model.Correct(out, e.s.Labels, e.s.Test))
			metrics[4] = float32(model.SoftmaxCE(out, e.s.Labels, e.s.Val, 1, nil))
			evalSent += stats.Total().BytesSent - s0
			row.EvalMs = ms(time.Since(t1))
			row.Evaluated = true
		}
		stopReq := float32(0)
		if e.cfg.Stop != nil && e.cfg.Stop() {
			stopReq = 1
		}
		// The stop request rides on the metrics allreduce, so every rank
		// stops after the same epoch even if the signal reached them apart.
		counts := []float32{float32(len(e.s.Train)), float32(len(e.s.Val)), float32(len(e.s.Test)), stopReq}
		all := append(metrics, counts...)
		if e.P > 1 {
			if err := e.c.Allreduce(all); err != nil {
				return nil, fmt.Errorf("epoch %d metrics: %w", ep+1, err)
			}
		}
		row.Loss = float64(all[0]) / float64(e.s.GlobalTrain)
		if evalEpoch {
			row.TrainAcc = ratio(all[1], all[5])
			row.ValAcc = ratio(all[2], all[6])
			row.TestAcc = ratio(all[3], all[7])
			row.ValLoss = float64(all[4]) / math.Max(1, float64(all[6]))
			if row.ValAcc > best {
				best = row.ValAcc
				res.BestEpoch, res.BestValAcc, res.TestAtBest = row.Epoch, row.ValAcc, row.TestAcc
			}
			res.FinalTestAcc = row.TestAcc
		}
		res.FinalLoss = row.Loss
		res.Curve = append(res.Curve, row)
		if e.cfg.Log != nil && e.rank == 0 {
			fmt.Fprintln(e.cfg.Log, row.line())
		}
		stop := all[8] > 0
		if e.cfg.CheckpointDir != "" && (stop || (e.cfg.CheckpointEvery > 0 && (ep+1)%e.cfg.CheckpointEvery == 0)) {
			if err := e.saveCheckpoint(e.cfg.CheckpointDir, ep+1, res, best); err != nil {
				return nil, err
			}
			if e.cfg.Log != nil && e.rank == 0 {
				fmt.Fprintf(e.cfg.Log, "checkpoint: %s after epoch %d\n", e.cfg.CheckpointDir, ep+1)
			}
		}
		if stop {
			res.Stopped = true
			break
		}
	}
	res.TotalSec = time.Since(start).Seconds()
	if n := len(res.Curve); n > 1 {
		var s float64
		for _, r := range res.Curve[1:] {
			s += r.Ms
		}
		res.MeanEpochMs = s / float64(n-1)
	} else if n == 1 {
		res.MeanEpochMs = res.Curve[0].Ms
	}
	res.Broadcasts = e.broadcastLog()
	res.Clipped = e.clipped
	tot := stats.Total()
	mine := RankStats{Rank: e.rank, Rows: e.rows, ComputeSec: compute.Seconds(), CommSec: tot.Seconds,
		BytesSent: tot.BytesSent - evalSent, BytesRecv: tot.BytesRecv, EvalBytesSent: evalSent, PeakRSSMB: PeakRSSMB()}
	var err error
	if res.PerRank, err = e.gatherRankStats(mine, wait); err != nil {
		return nil, err
	}
	if res.Stopped {
		return res, ErrStopped
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(a, b float32) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (r Epoch) line() string {
	s := fmt.Sprintf("epoch %4d  loss %.4f", r.Epoch, r.Loss)
	if r.Evaluated {
		s += fmt.Sprintf("  train %.4f  val %.4f  test %.4f", r.TrainAcc, r.ValAcc, r.TestAcc)
	}
	s += fmt.Sprintf("  %7.2f ms", r.Ms)
	if r.Sent+r.Skipped > 0 {
		s += fmt.Sprintf("  bcast %d sent %d skipped  %.2f MB sent", r.Sent, r.Skipped, float64(r.BytesSent)/1e6)
	}
	return s
}

// countBroadcasts counts forward roots that broadcast or were skipped in epoch ep.
func (e *Engine) countBroadcasts(ep int) (sent, skipped int) {
	for _, L := range e.layers {
		if L.fwd == nil {
			continue
		}
		for j := range L.fwd.log {
			if n := len(L.fwd.log[j]); n > 0 && L.fwd.log[j][n-1] == ep {
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
		if L.fwd == nil {
			continue
		}
		m := map[string][]int{}
		for j, eps := range L.fwd.log {
			m[strconv.Itoa(j)] = append([]int{}, eps...)
		}
		out[strconv.Itoa(l+1)] = m
	}
	return out
}

const rankStatFields = 8

func (e *Engine) gatherRankStats(mine RankStats, wait time.Duration) ([]RankStats, error) {
	v := []float32{float32(mine.Rows), float32(mine.ComputeSec), float32(mine.CommSec), float32(wait.Seconds()),
		float32(mine.BytesSent), float32(mine.BytesRecv), float32(mine.EvalBytesSent), float32(mine.PeakRSSMB)}
	all := make([]float32, rankStatFields*e.P)
	if e.P == 1 {
		copy(all, v)
	} else {
		counts := make([]int, e.P)
		for i := range counts {
			counts[i] = rankStatFields
		}
		if err := e.c.Allgatherv(v, all, counts); err != nil {
			return nil, fmt.Errorf("gathering per-rank statistics: %w", err)
		}
	}
	out := make([]RankStats, e.P)
	for r := range out {
		f := all[r*rankStatFields:]
		out[r] = RankStats{Rank: r, Rows: int(f[0]), ComputeSec: float64(f[1]), CommSec: float64(f[2]), CommWaitSec: float64(f[3]),
			BytesSent: int64(f[4]), BytesRecv: int64(f[5]), EvalBytesSent: int64(f[6]), PeakRSSMB: float64(f[7])}
	}
	return out, nil
}

// PeakRSSMB is the process's peak resident memory (VmHWM), in MB.
func PeakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

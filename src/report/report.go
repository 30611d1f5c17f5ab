// Package report turns run results (the JSON every `sancus train` writes)
// into a CSV table and PNG plots: compute vs communication per run (SANCUS
// Figure 21), scaling curves with their ideal lines, broadcast epochs per
// (layer, root) (Figure 24) and accuracy curves. It reads nothing else.
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"sancus/src/atomicfile"
	"sancus/src/result"
)

// Label names a run in tables and legends by what tells runs apart:
// dataset, model, ranks, partitioner, exchange, wire, staleness, batch
// mode and seed.
func Label(r *result.Run) string {
	c := r.Settings
	p := c.Staleness
	if p != "none" {
		p += "(" + strconv.FormatFloat(c.Eps, 'g', -1, 64) + ")"
	}
	l := fmt.Sprintf("%s %s P=%d", r.Dataset, orDash(c.Model), r.Result.Ranks)
	for _, s := range []string{r.Partitioner, c.Exchange, c.Wire, p} {
		if s != "" {
			l += " " + s
		}
	}
	if c.Batch == "clusters" {
		l += " clusters"
	}
	return l + " seed=" + strconv.FormatUint(c.Seed, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// EpochTime says how a row's ms_per_epoch is taken.
const EpochTime = "ms/epoch: rank 0's training step (forward, backward, update), which waits for the slowest rank at the gradient allreduce; the mean over the epochs after the first; evaluation excluded"

// Load reads result JSONs from files or, recursively, directories.
func Load(paths ...string) ([]*result.Run, error) {
	var runs []*result.Run
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || filepath.Ext(path) != ".json" {
				return nil
			}
			b, err := atomicfile.ReadAll(path, result.MaxBytes) // a FIFO named *.json is refused, not waited on
			if err != nil {
				return err
			}
			var r result.Run
			if err := json.Unmarshal(b, &r); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if r.Result == nil || len(r.Result.Curve) == 0 {
				return nil // not a training result (a benchmark table, meta.json, …)
			}
			r.Path = path
			runs = append(runs, &r)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(runs, func(i, j int) bool {
		a, b := runs[i], runs[j]
		if a.Dataset != b.Dataset {
			return a.Dataset < b.Dataset
		}
		if a.Settings.Staleness != b.Settings.Staleness {
			return a.Settings.Staleness < b.Settings.Staleness
		}
		if a.Settings.Eps != b.Settings.Eps {
			return a.Settings.Eps < b.Settings.Eps
		}
		return a.Result.Ranks < b.Result.Ranks
	})
	return runs, nil
}

// Row is one line of the summary table.
type Row struct {
	Run            *result.Run
	MsPerEpoch     float64
	MBSentPerEpoch float64 // per rank, mean over ranks, training traffic
	// Rank 0's training traffic by purpose, per epoch: the layers' blocks
	// and rows, and the weight-gradient allreduce.
	ExchangeMBPerEpoch, AllreduceMBPerEpoch float64
	ComputeSec                              float64 // mean over ranks
	CommWaitSec                             float64 // communication not hidden by compute, mean over ranks
	SkippedFraction                         float64
	TestAcc                                 float64
	PeakRSSMB                               float64 // max over ranks
	EpochsCompleted                         int
	BroadcastsPerEpc                        float64
	// TimeToTarget is the training seconds (evaluation excluded) until the
	// validation accuracy first reached its graph's Target; -1: never.
	TimeToTarget float64
}

// TargetFraction is the fraction of the best validation accuracy that
// TimeToTarget waits for.
const TargetFraction = 0.99

// Target is what runs of one graph are timed to: every run of a graph is
// held to the same accuracy, so their times compare.
type Target struct {
	Best  float64 // the best validation accuracy any run of the graph reached
	Value float64 // TargetFraction of Best
}

var perP = regexp.MustCompile(`-P[0-9]+$`)

// Graph is the graph a run trained on: its dataset's name without the
// "-P<n>" that names per-P copies of one graph (shard directories,
// weak-scaling graphs), so runs of one graph at several P group together.
func Graph(r *result.Run) string { return perP.ReplaceAllString(r.Dataset, "") }

// Targets gives each graph's target, from the runs of it.
func Targets(runs []*result.Run) map[string]Target {
	t := map[string]Target{}
	for _, r := range runs {
		g := Graph(r)
		best := max(t[g].Best, r.Result.BestValAcc)
		t[g] = Target{Best: best, Value: TargetFraction * best}
	}
	return t
}

// timeToTarget sets each row's TimeToTarget.
func timeToTarget(rows []Row) {
	runs := make([]*result.Run, len(rows))
	for i, r := range rows {
		runs[i] = r.Run
	}
	targets := Targets(runs)
	for i := range rows {
		r := &rows[i]
		r.TimeToTarget = -1
		goal := targets[Graph(r.Run)].Value
		t := 0.0
		for _, e := range r.Run.Result.Curve {
			t += e.Ms / 1000
			if e.Evaluated && e.ValAcc >= goal {
				r.TimeToTarget = t
				break
			}
		}
	}
}

// Summarize computes the table rows.
func Summarize(runs []*result.Run) []Row {
	var rows []Row
	for _, r := range runs {
		res := r.Result
		row := Row{Run: r, MsPerEpoch: res.MeanEpochMs, TestAcc: res.TestAtBest, EpochsCompleted: len(res.Curve)}
		var sent, skip int
		for _, e := range res.Curve {
			sent += e.Sent
			skip += e.Skipped
			row.ExchangeMBPerEpoch += float64(e.ExchangeBytes) / 1e6 / float64(len(res.Curve))
			row.AllreduceMBPerEpoch += float64(e.AllreduceBytes) / 1e6 / float64(len(res.Curve))
		}
		if sent+skip > 0 {
			row.SkippedFraction = float64(skip) / float64(sent+skip)
			row.BroadcastsPerEpc = float64(sent) / float64(len(res.Curve))
		}
		for _, pr := range res.PerRank {
			row.MBSentPerEpoch += float64(pr.BytesSent) / 1e6 / float64(len(res.Curve))
			row.ComputeSec += pr.ComputeSec
			row.CommWaitSec += pr.CommWaitSec
			row.PeakRSSMB = max(row.PeakRSSMB, pr.PeakRSSMB)
		}
		if n := float64(len(res.PerRank)); n > 0 {
			row.MBSentPerEpoch /= n
			row.ComputeSec /= n
			row.CommWaitSec /= n
		}
		rows = append(rows, row)
	}
	timeToTarget(rows)
	return rows
}

// WriteCSV writes the summary table.
func WriteCSV(path string, rows []Row) error {
	return atomicfile.Write(path, func(f io.Writer) error {
		w := csv.NewWriter(f)
		w.Write([]string{"dataset", "model", "ranks", "partitioner", "exchange", "wire", "policy", "eps", "max_stale", "batch", "seed", "epochs", "ms_per_epoch", "mb_sent_per_rank_per_epoch", "rank0_mb_exchange_per_epoch", "rank0_mb_allreduce_per_epoch",
			"compute_s", "comm_wait_s", "skipped_fraction", "test_acc_at_best_val", "peak_rss_mb", "time_to_target_s", "job_id", "file"})
		f3 := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
		for _, r := range rows {
			c := r.Run.Settings
			w.Write([]string{r.Run.Dataset, c.Model, strconv.Itoa(r.Run.Result.Ranks), r.Run.Partitioner, c.Exchange, c.Wire, c.Staleness, strconv.FormatFloat(c.Eps, 'g', -1, 64),
				strconv.Itoa(c.MaxStale), orDash(c.Batch), strconv.FormatUint(c.Seed, 10), strconv.Itoa(r.EpochsCompleted), f3(r.MsPerEpoch), f3(r.MBSentPerEpoch), f3(r.ExchangeMBPerEpoch), f3(r.AllreduceMBPerEpoch), f3(r.ComputeSec),
				f3(r.CommWaitSec), f3(r.SkippedFraction), f3(r.TestAcc), f3(r.PeakRSSMB), f3(r.TimeToTarget), r.Run.JobID, r.Run.Path})
		}
		w.Flush()
		return w.Error()
	})
}

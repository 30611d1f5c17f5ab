// Package charts draws result runs as PNG charts (gonum/plot). It is a
// package, and sancus-report a binary, of their own: gonum/plot parses a
// dozen fonts when a program starts, 5.6 MB of resident memory in every
// process linking it, and training ranks draw nothing.
package charts

import (
	"sancus/src/report"
	"sancus/src/result"

	"fmt"
	"image/color"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Write draws the PNGs into dir and returns their paths.
func Write(dir string, runs []*result.Run) ([]string, error) {
	rows := report.Summarize(runs)
	var out []string
	add := func(name string, p *plot.Plot, w, h vg.Length, err error) error {
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		if err := p.Save(w, h, path); err != nil {
			return fmt.Errorf("saving %s: %w", path, err)
		}
		out = append(out, path)
		return nil
	}
	p, err := breakdown(rows)
	if err := add("compute_vs_comm.png", p, 8*vg.Inch, 4.5*vg.Inch, err); err != nil {
		return nil, err
	}
	if p, err := scaling(rows); p != nil || err != nil {
		if err := add("scaling.png", p, 6*vg.Inch, 4.5*vg.Inch, err); err != nil {
			return nil, err
		}
	}
	p, err = accuracy(runs)
	if err := add("accuracy.png", p, 7*vg.Inch, 4.5*vg.Inch, err); err != nil {
		return nil, err
	}
	p, err = accuracyOverTime(runs)
	if err := add("accuracy_vs_time.png", p, 7*vg.Inch, 4.5*vg.Inch, err); err != nil {
		return nil, err
	}
	for i, r := range runs {
		if r.Result.Ranks < 2 || r.Settings.Staleness == "none" {
			continue
		}
		p, err := broadcasts(r)
		if err := add(fmt.Sprintf("broadcasts_%02d.png", i), p, 7*vg.Inch, 3.5*vg.Inch, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func short(r *result.Run) string {
	p := r.Settings.Staleness
	switch p {
	case "epoch-fixed":
		p = "E"
	case "epoch-adaptive":
		p = "A"
	case "variation-gap":
		p = "H"
	}
	if p != "none" {
		p += strconv.FormatFloat(r.Settings.Eps, 'g', -1, 64)
	}
	if r.Settings.Batch == "clusters" {
		p += fmt.Sprintf(" clusters/%d", r.Settings.ClustersPerStep)
	}
	return fmt.Sprintf("P%d %s", r.Result.Ranks, p)
}

// breakdown: per run, seconds per epoch split into compute and exposed
// communication (SANCUS Figure 21).
func breakdown(rows []report.Row) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Time per epoch: compute vs. exposed communication (mean over ranks)"
	p.Y.Label.Text = "ms per epoch"
	comp, comm := make(plotter.Values, len(rows)), make(plotter.Values, len(rows))
	names := make([]string, len(rows))
	for i, r := range rows {
		n := float64(r.EpochsCompleted)
		comp[i] = 1000 * r.ComputeSec / n
		comm[i] = 1000 * r.CommWaitSec / n
		names[i] = short(r.Run)
	}
	w := vg.Points(18)
	bc, err := plotter.NewBarChart(comp, w)
	if err != nil {
		return nil, err
	}
	bc.Color = color.RGBA{R: 66, G: 133, B: 244, A: 255}
	bm, err := plotter.NewBarChart(comm, w)
	if err != nil {
		return nil, err
	}
	bm.Color = color.RGBA{R: 234, G: 67, B: 53, A: 255}
	bm.StackOn(bc)
	p.Add(bc, bm)
	top := 0.0
	for i := range comp {
		top = max(top, comp[i]+comm[i])
	}
	p.Y.Min, p.Y.Max = 0, top*1.3 // room for the legend above the bars
	p.Legend.Add("compute", bc)
	p.Legend.Add("communication (not overlapped)", bm)
	p.Legend.Top = true
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -0.8
	return p, nil
}

var perP = regexp.MustCompile(`-P[0-9]+$`)

// scaling: ms per epoch against ranks for each (dataset, policy), with the
// ideal line for strong scaling (t1/P) or weak scaling (t1), as the runs'
// node counts say.
func scaling(rows []report.Row) (*plot.Plot, error) {
	groups := map[string][]report.Row{}
	for _, r := range rows {
		// One series per (graph, policy); "-P<n>" suffixes name per-P copies of
		// one graph (weak-scaling graphs, shard directories).
		k := fmt.Sprintf("%s%g|%s", r.Run.Settings.Staleness, r.Run.Settings.Eps, perP.ReplaceAllString(r.Run.Dataset, ""))
		groups[k] = append(groups[k], r)
	}
	keys := make([]string, 0, len(groups))
	for k, g := range groups {
		ranks := map[int]bool{}
		for _, r := range g {
			ranks[r.Run.Result.Ranks] = true
		}
		if len(ranks) > 1 && len(ranks) == len(g) { // one run per P: a scaling series
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	sort.Strings(keys)
	p := plot.New()
	p.Title.Text = "Scaling: time per epoch"
	p.X.Label.Text = "ranks P"
	p.Y.Label.Text = "ms per epoch"
	for i, k := range keys {
		g := groups[k]
		sort.Slice(g, func(a, b int) bool { return g[a].Run.Result.Ranks < g[b].Run.Result.Ranks })
		pts, ideal := make(plotter.XYs, len(g)), make(plotter.XYs, len(g))
		base := g[0]
		weak := g[len(g)-1].Run.Nodes != base.Run.Nodes
		for j, r := range g {
			x := float64(r.Run.Result.Ranks)
			pts[j] = plotter.XY{X: x, Y: r.MsPerEpoch}
			ideal[j] = plotter.XY{X: x, Y: base.MsPerEpoch * float64(base.Run.Result.Ranks) / x}
			if weak {
				ideal[j].Y = base.MsPerEpoch
			}
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		c := plotutil.Color(i)
		l.Color, s.Color = c, c
		il, err := plotter.NewLine(ideal)
		if err != nil {
			return nil, err
		}
		il.Color = c
		il.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l, s, il)
		kind := "strong"
		if weak {
			kind = "weak"
		}
		p.Legend.Add(fmt.Sprintf("%s, %s (%s)", perP.ReplaceAllString(g[0].Run.Dataset, ""), short(g[0].Run)[len(fmt.Sprint(g[0].Run.Result.Ranks))+2:], kind), l, s)
		p.Legend.Add("ideal", il)
	}
	p.Legend.Top = true
	p.Y.Min = 0
	return p, nil
}

// accuracy: validation accuracy (micro-F1 for multi-label runs) per epoch
// for every run.
func accuracy(runs []*result.Run) (*plot.Plot, error) {
	metric := "accuracy"
	for _, r := range runs {
		if r.Result.Metric == "micro-f1" {
			metric = "micro-F1"
			if len(runs) > 1 {
				metric = "accuracy or micro-F1 (multi-label)"
			}
		}
	}
	return curves(runs, "Validation "+metric, "epoch", metric, func(r *result.Run) (pts plotter.XYs) {
		for _, e := range r.Result.Curve {
			if e.Evaluated {
				pts = append(pts, plotter.XY{X: float64(e.Epoch), Y: e.ValAcc})
			}
		}
		return pts
	})
}

// accuracyOverTime: test accuracy against the seconds spent training
// (evaluation excluded), so runs whose epochs cost differently — global
// and cluster batches — compare at equal wall time.
func accuracyOverTime(runs []*result.Run) (*plot.Plot, error) {
	return curves(runs, "Test accuracy over training time", "seconds of training", "test accuracy", func(r *result.Run) (pts plotter.XYs) {
		t := 0.0
		for _, e := range r.Result.Curve {
			t += e.Ms / 1000
			if e.Evaluated {
				pts = append(pts, plotter.XY{X: t, Y: e.TestAcc})
			}
		}
		return pts
	})
}

// curves draws one line per run from the points it gives, on [0, 1].
func curves(runs []*result.Run, title, x, y string, points func(*result.Run) plotter.XYs) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	for i, r := range runs {
		pts := points(r)
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		p.Add(l)
		p.Legend.Add(short(r), l)
	}
	p.Legend.Top = true
	p.Legend.Left = false
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

// broadcasts: for one run, a mark for every epoch in which (layer, root)
// broadcast (SANCUS Figure 24); gaps are skipped broadcasts.
func broadcasts(r *result.Run) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Broadcast epochs per (layer, root): " + report.Label(r)
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = "layer / root"
	var layers []string
	for l := range r.Result.Broadcasts {
		layers = append(layers, l)
	}
	sort.Strings(layers)
	var names []string
	y := 0.0
	for _, l := range layers {
		roots := r.Result.Broadcasts[l]
		for j := 0; j < len(roots); j++ {
			var pts plotter.XYs
			for _, ep := range roots[strconv.Itoa(j)] {
				pts = append(pts, plotter.XY{X: float64(ep + 1), Y: y})
			}
			if len(pts) > 0 {
				s, err := plotter.NewScatter(pts)
				if err != nil {
					return nil, err
				}
				s.GlyphStyle.Radius = vg.Points(1.5)
				s.GlyphStyle.Color = plotutil.Color(j)
				p.Add(s)
			}
			names = append(names, fmt.Sprintf("L%s r%d", l, j))
			y++
		}
	}
	ticks := make([]plot.Tick, len(names))
	for i, n := range names {
		ticks[i] = plot.Tick{Value: float64(i), Label: n}
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.5, y-0.5
	return p, nil
}

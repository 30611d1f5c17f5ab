// Package charts draws result runs as PNG charts (gonum/plot). It is a
// package, and sancus-report a binary, of their own: gonum/plot parses a
// dozen fonts when a program starts, 5.6 MB of resident memory in every
// process linking it, and training ranks draw nothing.
//
// Every chart names what its runs share (dataset, model, ranks) in its
// title and each series by what sets it apart, in words; its legend stands
// in a column beside the plot area, never over the data.
package charts

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"sancus/src/atomicfile"
	"sancus/src/report"
	"sancus/src/result"
)

// Write draws the PNGs into dir and returns their paths.
func Write(dir string, runs []*result.Run) ([]string, error) {
	rows := report.Summarize(runs)
	names, shared := describe(runs)
	var out []string
	add := func(name string, p *plot.Plot, w, h vg.Length, err error) error {
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		if err := save(p, w, h, path); err != nil {
			return fmt.Errorf("saving %s: %w", path, err)
		}
		out = append(out, path)
		return nil
	}
	p, err := breakdown(rows, names, shared)
	if err := add("compute_vs_comm.png", p, max(8, 0.7*vg.Length(len(rows)))*vg.Inch, 4.5*vg.Inch, err); err != nil {
		return nil, err
	}
	if p, err := scaling(rows, names); p != nil || err != nil {
		if err := add("scaling.png", p, 6*vg.Inch, 4.5*vg.Inch, err); err != nil {
			return nil, err
		}
	}
	p, err = accuracy(runs, names, shared)
	if err := add("accuracy.png", p, 7*vg.Inch, 4.5*vg.Inch, err); err != nil {
		return nil, err
	}
	p, err = accuracyOverTime(runs, names, shared)
	if err := add("accuracy_vs_time.png", p, 7*vg.Inch, 4.5*vg.Inch, err); err != nil {
		return nil, err
	}
	p, err = timeToAccuracy(rows, names, shared)
	if err := add("time_to_accuracy.png", p, 7*vg.Inch, 4*vg.Inch, err); err != nil {
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

// facets are the words a run is described by, in order.
func facets(r *result.Run) [][2]string {
	model := strings.ToUpper(r.Settings.Model)
	if model == "" {
		model = "GCN"
	}
	policy := "no staleness"
	switch r.Settings.Staleness {
	case "epoch-fixed":
		policy = "epoch-fixed ε_E = " + strconv.FormatFloat(r.Settings.Eps, 'g', -1, 64)
	case "epoch-adaptive":
		policy = "epoch-adaptive ε_A = " + strconv.FormatFloat(r.Settings.Eps, 'g', -1, 64)
	case "variation-gap":
		policy = "variation-gap ε_H = " + strconv.FormatFloat(r.Settings.Eps, 'g', -1, 64)
	}
	wire := "fp32 wire"
	if w := r.Settings.Wire; w != "" {
		wire = w + " wire"
	}
	exchange := map[string]string{"dense": "dense broadcasts", "sparse": "sparse rows"}[r.Settings.Exchange]
	batch := "global batch"
	if r.Settings.Batch == "clusters" {
		batch = fmt.Sprintf("%d clusters a step", r.Settings.ClustersPerStep)
	}
	return [][2]string{{"dataset", perP.ReplaceAllString(r.Dataset, "")}, {"model", model}, {"ranks", fmt.Sprintf("P = %d", r.Result.Ranks)},
		{"policy", policy}, {"wire", wire}, {"exchange", exchange}, {"batch", batch}}
}

// describe names every run by what sets it apart from the others, and
// returns what all share, for the titles.
func describe(runs []*result.Run) (names map[*result.Run]string, shared string) {
	all := make([][][2]string, len(runs))
	for i, r := range runs {
		all[i] = facets(r)
	}
	var common []string
	varies := map[string]bool{}
	if len(runs) > 0 {
		for k, f := range all[0] {
			same := true
			for _, o := range all[1:] {
				same = same && o[k][1] == f[1]
			}
			if same && f[1] != "" {
				common = append(common, f[1])
			} else if !same {
				varies[f[0]] = true
			}
		}
	}
	names = map[*result.Run]string{}
	for i, r := range runs {
		var parts []string
		for _, f := range all[i] {
			if varies[f[0]] && f[1] != "" {
				parts = append(parts, f[1])
			}
		}
		if len(parts) == 0 {
			parts = []string{"this run"}
		}
		names[r] = strings.Join(parts, ", ")
	}
	// Runs that differ only in what the settings do not say (a partition,
	// a seed) are told apart by their files' names.
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	for r, n := range names {
		if count[n] > 1 && r.Path != "" {
			names[r] = n + " (" + strings.TrimSuffix(filepath.Base(r.Path), ".json") + ")"
		}
	}
	return names, strings.Join(common, ", ")
}

// titled is a title with what the runs share beneath it.
func titled(what, shared string) string {
	if shared == "" {
		return what
	}
	return what + "\n" + shared
}

// save writes p as a PNG of w × h, its legend drawn in a column of its own
// to the right of the plot area, so that it covers no data.
func save(p *plot.Plot, w, h vg.Length, path string) error {
	legend := p.Legend
	measure := draw.New(vgimg.New(w, h))
	r := legend.Rectangle(measure)
	lw := r.Max.X - r.Min.X
	if lw > 0 {
		lw += vg.Points(24)
	}
	img := vgimg.New(w+lw, h)
	dc := draw.New(img)
	p.Legend = plot.NewLegend()
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	p.Legend = legend
	if lw > 0 {
		legend.Top, legend.Left = true, true
		legend.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - vg.Points(6)
		legend.Draw(draw.Crop(dc, w+vg.Points(18), 0, 0, 0))
	}
	return atomicfile.Write(path, func(f io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(f)
		return err
	})
}

// breakdown: per run, milliseconds per epoch split into compute and
// exposed communication (SANCUS Figure 21).
func breakdown(rows []report.Row, names map[*result.Run]string, shared string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = titled("Time per epoch: compute and the communication it did not hide (mean over ranks)", shared)
	p.Y.Label.Text = "ms per epoch"
	comp, comm := make(plotter.Values, len(rows)), make(plotter.Values, len(rows))
	labels := make([]string, len(rows))
	for i, r := range rows {
		n := float64(r.EpochsCompleted)
		comp[i] = 1000 * r.ComputeSec / n
		comm[i] = 1000 * r.CommWaitSec / n
		labels[i] = names[r.Run]
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
	p.Y.Min = 0
	p.Legend.Add("compute", bc)
	p.Legend.Add("exposed communication", bm)
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.6
	p.X.Tick.Label.XAlign = -0.8
	return p, nil
}

var perP = regexp.MustCompile(`-P[0-9]+$`)

// scaling: ms per epoch against ranks for each (dataset, configuration),
// with the ideal line for strong scaling (t1/P) or weak scaling (t1), as
// the runs' node counts say.
func scaling(rows []report.Row, names map[*result.Run]string) (*plot.Plot, error) {
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
	p.Title.Text = "Scaling: time per epoch against ranks"
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
		f := facets(g[0].Run)
		p.Legend.Add(fmt.Sprintf("%s, %s, %s", perP.ReplaceAllString(g[0].Run.Dataset, ""), f[3][1], kind+" scaling"), l, s)
		p.Legend.Add("ideal", il)
	}
	p.Y.Min = 0
	return p, nil
}

// accuracy: validation accuracy (micro-F1 for multi-label runs) per epoch
// for every run.
func accuracy(runs []*result.Run, names map[*result.Run]string, shared string) (*plot.Plot, error) {
	metric := metricOf(runs)
	return curves(runs, names, titled("Validation "+metric+" by epoch", shared), "epoch", "validation "+metric, func(r *result.Run) (pts plotter.XYs) {
		for _, e := range r.Result.Curve {
			if e.Evaluated {
				pts = append(pts, plotter.XY{X: float64(e.Epoch), Y: e.ValAcc})
			}
		}
		return pts
	})
}

func metricOf(runs []*result.Run) string {
	metric := "accuracy"
	for _, r := range runs {
		if r.Result.Metric == "micro-f1" {
			metric = "micro-F1"
			if len(runs) > 1 {
				metric = "accuracy or micro-F1"
			}
		}
	}
	return metric
}

// accuracyOverTime: test accuracy against the seconds spent training
// (evaluation excluded), so runs whose epochs cost differently — global
// and cluster batches, fast and slow links — compare at equal wall time.
func accuracyOverTime(runs []*result.Run, names map[*result.Run]string, shared string) (*plot.Plot, error) {
	metric := metricOf(runs)
	return curves(runs, names, titled("Test "+metric+" over training time", shared), "seconds of training (evaluation excluded)", "test "+metric, func(r *result.Run) (pts plotter.XYs) {
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

// timeToAccuracy: per run, the training seconds until its validation
// accuracy first reached 99% of the best any run on its dataset reached.
func timeToAccuracy(rows []report.Row, names map[*result.Run]string, shared string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = titled("Time to accuracy: training seconds to 99% of the best validation "+metricOf(runsOf(rows)), shared)
	p.X.Label.Text = "seconds of training (evaluation excluded)"
	vals := make(plotter.Values, len(rows))
	labels := make([]string, len(rows))
	for i, r := range rows {
		vals[i] = max(r.TimeToTarget, 0)
		labels[i] = names[r.Run]
		if r.TimeToTarget < 0 {
			labels[i] += " (not reached)"
		}
	}
	bc, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return nil, err
	}
	bc.Horizontal = true
	bc.Color = color.RGBA{R: 66, G: 133, B: 244, A: 255}
	p.Add(bc)
	p.NominalY(labels...)
	p.X.Min = 0
	for _, v := range vals {
		p.X.Max = max(p.X.Max, 1.05*v)
	}
	return p, nil
}

func runsOf(rows []report.Row) []*result.Run {
	runs := make([]*result.Run, len(rows))
	for i, r := range rows {
		runs[i] = r.Run
	}
	return runs
}

// curves draws one line per run from the points it gives, on [0, 1].
func curves(runs []*result.Run, names map[*result.Run]string, title, x, y string, points func(*result.Run) plotter.XYs) (*plot.Plot, error) {
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
		p.Legend.Add(names[r], l)
	}
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

// broadcasts: for one run, a mark for every epoch in which (layer, root)
// broadcast (SANCUS Figure 24); gaps are skipped broadcasts.
func broadcasts(r *result.Run) (*plot.Plot, error) {
	p := plot.New()
	f := facets(r)
	p.Title.Text = titled("Broadcast epochs per (layer, root): gaps are skipped broadcasts", fmt.Sprintf("%s, %s, %s, %s", f[0][1], f[1][1], f[2][1], f[3][1]))
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = "layer, root"
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
			names = append(names, fmt.Sprintf("layer %s, rank %d", l, j))
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

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
	"slices"
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
	if p, err := scaling(rows); p != nil || err != nil {
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
	if err := add("time_to_accuracy.png", p, 7*vg.Inch, vg.Length(max(3.5, 1.4+0.35*float64(len(rows))))*vg.Inch, err); err != nil {
		return nil, err
	}
	files := broadcastFiles(runs)
	for _, r := range runs {
		if files[r] == "" {
			continue
		}
		p, err := broadcasts(r)
		if err := add(files[r], p, 7*vg.Inch, 3.5*vg.Inch, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// broadcastFiles names the broadcast chart of each run that skips
// broadcasts (two or more ranks, a staleness policy) by the run's label,
// so that a name says which run it shows and stays the same whatever
// other runs the report reads; runs of one label add their file's name.
func broadcastFiles(runs []*result.Run) map[*result.Run]string {
	files := map[*result.Run]string{}
	count := map[string]int{}
	for _, r := range runs {
		if r.Result.Ranks < 2 || r.Settings.Staleness == "none" || r.Settings.Staleness == "" {
			continue
		}
		files[r] = "broadcasts_" + slug(report.Label(r))
		count[files[r]]++
	}
	for r, f := range files {
		if count[f] > 1 {
			f += "_" + slug(strings.TrimSuffix(filepath.Base(r.Path), ".json"))
		}
		files[r] = f + ".png"
	}
	return files
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// slug is a label as a file name: "P=2" as "P2", "(0.03)" as "-0.03",
// words joined by "_".
func slug(label string) string {
	label = strings.NewReplacer("=", "", "(", "-", ")", "").Replace(label)
	return strings.Trim(unsafeName.ReplaceAllString(label, "_"), "_")
}

// facet is one word a run is described by: its column and value.
type facet struct{ key, value string }

// facets are the words a run is described by, in order: the columns of
// report.Label.
func facets(r *result.Run) []facet {
	model := strings.ToUpper(r.Settings.Model)
	if model == "" {
		model = "GCN"
	}
	partition := ""
	if r.Partitioner != "" {
		partition = r.Partitioner + " partition"
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
	return []facet{{"dataset", report.Graph(r)}, {"model", model}, {"ranks", fmt.Sprintf("P = %d", r.Result.Ranks)},
		{"partitioner", partition}, {"policy", policy(r)}, {"wire", wire}, {"exchange", exchange}, {"batch", batch},
		{"seed", "seed " + strconv.FormatUint(r.Settings.Seed, 10)}}
}

func policy(r *result.Run) string {
	eps := strconv.FormatFloat(r.Settings.Eps, 'g', -1, 64)
	switch r.Settings.Staleness {
	case "epoch-fixed":
		return "epoch-fixed ε_E = " + eps
	case "epoch-adaptive":
		return "epoch-adaptive ε_A = " + eps
	case "variation-gap":
		return "variation-gap ε_H = " + eps
	}
	return "no staleness"
}

func facetOf(r *result.Run, key string) string {
	for _, f := range facets(r) {
		if f.key == key {
			return f.value
		}
	}
	return ""
}

// describe names every run by what sets it apart from the others, and
// returns what all share, for the titles.
func describe(runs []*result.Run) (names map[*result.Run]string, shared string) {
	all := make([][]facet, len(runs))
	for i, r := range runs {
		all[i] = facets(r)
	}
	apart, common := distinguish(all)
	names = map[*result.Run]string{}
	for i, r := range runs {
		names[r] = apart[i]
	}
	// Runs alike in every column are told apart by their files' names, or
	// where those do not tell them apart by their order.
	alike := map[string][]*result.Run{}
	for _, r := range runs {
		alike[names[r]] = append(alike[names[r]], r)
	}
	for n, rs := range alike {
		if len(rs) < 2 {
			continue
		}
		files := map[string]bool{}
		for _, r := range rs {
			files[filepath.Base(r.Path)] = true
		}
		for i, r := range rs {
			if len(files) == len(rs) && r.Path != "" {
				names[r] = n + " (" + strings.TrimSuffix(filepath.Base(r.Path), ".json") + ")"
			} else {
				names[r] = fmt.Sprintf("%s (#%d)", n, i+1)
			}
		}
	}
	return names, strings.Join(common, ", ")
}

// distinguish names each item by the values of the columns in which the
// items differ ("this run" where they differ in none), and returns the
// values all share.
func distinguish(all [][]facet) (names, common []string) {
	varies := map[string]bool{}
	if len(all) > 0 {
		for k, f := range all[0] {
			same := true
			for _, o := range all[1:] {
				same = same && o[k].value == f.value
			}
			if same && f.value != "" {
				common = append(common, f.value)
			} else if !same {
				varies[f.key] = true
			}
		}
	}
	for _, fs := range all {
		var parts []string
		for _, f := range fs {
			if varies[f.key] && f.value != "" {
				parts = append(parts, f.value)
			}
		}
		if len(parts) == 0 {
			parts = []string{"this run"}
		}
		names = append(names, strings.Join(parts, ", "))
	}
	return names, common
}

// titled is a title with what the runs share beneath it.
func titled(what, shared string) string {
	if shared == "" {
		return what
	}
	return what + "\n" + shared
}

// wrap breaks each line of text wider than w after a comma (else a
// space), so that a title over a narrow plot is not cut at its edges.
func wrap(text string, w vg.Length, width func(string) vg.Length) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for width(line) > w {
			cut := -1
			for _, sep := range []string{", ", " "} {
				for i := len(line) - 1; i > 0 && cut < 0; i-- {
					if strings.HasPrefix(line[i:], sep) && width(line[:i+len(sep)-1]) <= w {
						cut = i + len(sep) - 1
					}
				}
				if cut >= 0 {
					break
				}
			}
			if cut < 0 {
				break // one word wider than the plot: left whole
			}
			out = append(out, strings.TrimSpace(line[:cut]))
			line = strings.TrimSpace(line[cut:])
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// save writes p as a PNG of w × h, its legend drawn in a column of its own
// to the right of the plot area, so that it covers no data.
func save(p *plot.Plot, w, h vg.Length, path string) error {
	p.Title.Text = wrap(p.Title.Text, w-vg.Points(12), p.Title.TextStyle.Width)
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

// palette is Tableau 10: ten hues told apart on screen and in print.
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 255}, {0xf2, 0x8e, 0x2b, 255}, {0xe1, 0x57, 0x59, 255}, {0x76, 0xb7, 0xb2, 255}, {0x59, 0xa1, 0x4f, 255},
	{0xed, 0xc9, 0x48, 255}, {0xb0, 0x7a, 0xa1, 255}, {0xff, 0x9d, 0xa7, 255}, {0x9c, 0x75, 0x5f, 255}, {0xba, 0xb0, 0xac, 255},
}

// dashes: solid, long, short, dash-dot.
var dashes = [][]vg.Length{nil, {vg.Points(7), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(7), vg.Points(2), vg.Points(2), vg.Points(2)}}

// lineStyle is the i-th series' colour, dashes and marker: neighbours
// differ in all three, so runs whose curves coincide still show apart.
func lineStyle(i int) (color.RGBA, []vg.Length, draw.GlyphDrawer) {
	return palette[i%len(palette)], dashes[i%len(dashes)], plotutil.Shape(i)
}

// timeUnit is the unit a time axis whose values reach most seconds reads
// in: ms under a second, s above; scale turns seconds into it.
func timeUnit(most float64) (scale float64, unit string) {
	if most < 1 {
		return 1000, "ms"
	}
	return 1, "s"
}

// breakdown: per run, milliseconds per epoch split into compute and
// exposed communication (SANCUS Figure 21).
func breakdown(rows []report.Row, names map[*result.Run]string, shared string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = titled("Time per epoch: compute and the communication it did not hide (mean over ranks)", shared)
	p.Y.Label.Text = "time per epoch (ms)"
	p.Y.Tick.Marker = ticks{}
	comp, comm := make(plotter.Values, len(rows)), make(plotter.Values, len(rows))
	labels := make([]string, len(rows))
	hosts := report.HostCores(runsOf(rows))
	for i, r := range rows {
		n := float64(r.EpochsCompleted)
		comp[i] = 1000 * r.ComputeSec / n
		comm[i] = 1000 * r.CommWaitSec / n
		labels[i] = names[r.Run]
		if _, over, sure := report.Oversubscribed(r.Run, hosts); over {
			labels[i] += map[bool]string{true: " (oversubscribed)", false: " (oversubscribed?)"}[sure] // the ranks waited for cores, not messages
		}
	}
	w := vg.Points(18)
	bc, err := plotter.NewBarChart(comp, w)
	if err != nil {
		return nil, err
	}
	bc.Color = palette[0]
	bm, err := plotter.NewBarChart(comm, w)
	if err != nil {
		return nil, err
	}
	bm.Color = palette[2]
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

// scaling: ms per epoch against ranks for each (graph, configuration),
// with the ideal line for strong scaling (t1/P) or weak scaling (t1), as
// the runs' node counts say. Several runs at one P (repeats, seeds) count
// as their mean. A point whose ranks' kernel threads outnumbered its
// host's cores is ringed and the title says so: there the ranks took
// turns on the cores, and its time says nothing of the method.
func scaling(rows []report.Row) (*plot.Plot, error) {
	groups := map[string][]report.Row{}
	groupFacets := map[string][]facet{}
	for _, r := range rows {
		var fs []facet
		var k []string
		for _, f := range facets(r.Run) {
			if f.key != "ranks" && f.key != "seed" {
				fs = append(fs, f)
				k = append(k, f.value)
			}
		}
		key := strings.Join(k, "|")
		groups[key] = append(groups[key], r)
		groupFacets[key] = fs
	}
	var keys []string
	for k, g := range groups {
		ranks := map[int]bool{}
		for _, r := range g {
			ranks[r.Run.Result.Ranks] = true
		}
		if len(ranks) > 1 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	sort.Strings(keys)
	var runs []*result.Run
	all := make([][]facet, len(keys))
	for i, k := range keys {
		all[i] = groupFacets[k]
		for _, r := range groups[k] {
			runs = append(runs, r.Run)
		}
	}
	names, common := distinguish(all)
	if len(keys) == 1 {
		names[0] = common[0] // the graph
	}
	hosts := report.HostCores(runs)
	p := plot.New()
	p.X.Label.Text = "ranks P"
	p.Y.Label.Text = "time per epoch (ms)"
	p.X.Tick.Marker, p.Y.Tick.Marker = ticks{integer: true}, ticks{}
	var over []string
	var overPts plotter.XYs
	for i, k := range keys {
		g := groups[k]
		sort.SliceStable(g, func(a, b int) bool { return g[a].Run.Result.Ranks < g[b].Run.Result.Ranks })
		var pts plotter.XYs
		var firsts []*result.Run
		var repeats []string
		for _, r := range g {
			x := float64(r.Run.Result.Ranks)
			if n := len(pts); n > 0 && pts[n-1].X == x {
				continue
			}
			sum, n := 0.0, 0
			for _, o := range g {
				if o.Run.Result.Ranks == r.Run.Result.Ranks {
					sum, n = sum+o.MsPerEpoch, n+1
				}
			}
			pts = append(pts, plotter.XY{X: x, Y: sum / float64(n)})
			if n > 1 {
				repeats = append(repeats, fmt.Sprintf("P = %d: mean of %d runs", r.Run.Result.Ranks, n))
			}
			firsts = append(firsts, r.Run)
			for _, o := range g {
				if o.Run.Result.Ranks != r.Run.Result.Ranks {
					continue
				}
				if cores, yes, sure := report.Oversubscribed(o.Run, hosts); yes {
					c := fmt.Sprintf("%d cores", cores)
					if !hosts[o.Run.Host].Known() {
						c = fmt.Sprintf("at most %d cores", cores)
					}
					threads := fmt.Sprintf("%d kernel threads", max(1, o.Run.Result.Threads))
					if o.Run.Result.Threads <= 1 {
						threads = "1 kernel thread"
					}
					line := fmt.Sprintf("P = %d oversubscribes host %s: %d ranks × %s each on %s", o.Run.Result.Ranks, o.Run.Host, o.Run.Result.Ranks, threads, c)
					if !sure {
						line += ", if all its ranks ran there"
					}
					if !slices.Contains(over, line) {
						over = append(over, line)
					}
					overPts = append(overPts, pts[len(pts)-1])
					break
				}
			}
		}
		base := pts[0]
		weak := firsts[len(firsts)-1].Nodes != firsts[0].Nodes
		ideal := make(plotter.XYs, len(pts))
		for j, pt := range pts {
			ideal[j] = plotter.XY{X: pt.X, Y: base.Y * base.X / pt.X}
			if weak {
				ideal[j].Y = base.Y
			}
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		c, _, shape := lineStyle(i)
		l.Color, s.Color, s.Shape = c, c, shape
		il, err := plotter.NewLine(ideal)
		if err != nil {
			return nil, err
		}
		il.Color = c
		il.Dashes = dashes[1]
		p.Add(l, s, il)
		kind := "strong scaling"
		if weak {
			kind = "weak scaling"
		}
		name := names[i] + ", " + kind
		if len(repeats) > 0 {
			name += " (" + strings.Join(repeats, "; ") + ")"
		}
		p.Legend.Add(name, l, s)
		p.Legend.Add("ideal "+kind, il)
	}
	what := "Scaling: time per epoch against ranks"
	if len(over) > 0 {
		ring, err := plotter.NewScatter(overPts)
		if err != nil {
			return nil, err
		}
		ring.Shape = draw.RingGlyph{}
		ring.Radius = vg.Points(7)
		ring.Color = color.RGBA{R: 200, A: 255}
		p.Add(ring)
		p.Legend.Add("ranks share cores (oversubscribed)", ring)
		what += "\n" + strings.Join(over, "\n")
	}
	p.Title.Text = titled(what, strings.Join(common, ", "))
	p.Y.Min = 0
	p.X.Min, p.X.Max = p.X.Min-0.3, p.X.Max+0.3
	return p, nil
}

// accuracy: validation accuracy (micro-F1 for multi-label runs) per epoch
// for every run.
func accuracy(runs []*result.Run, names map[*result.Run]string, shared string) (*plot.Plot, error) {
	metric := metricOf(runs)
	p, err := curves(runs, names, titled("Validation "+metric+" by epoch", shared), "validation "+metric, func(r *result.Run) (pts plotter.XYs) {
		for _, e := range r.Result.Curve {
			if e.Evaluated {
				pts = append(pts, plotter.XY{X: float64(e.Epoch), Y: e.ValAcc})
			}
		}
		return pts
	})
	if p != nil {
		p.X.Label.Text = "epoch"
		p.X.Tick.Marker = ticks{integer: true}
		p.X.Min = 0
	}
	return p, err
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

// accuracyOverTime: test accuracy against the time spent training
// (evaluation excluded), so runs whose epochs cost differently — global
// and cluster batches, fast and slow links — compare at equal wall time.
func accuracyOverTime(runs []*result.Run, names map[*result.Run]string, shared string) (*plot.Plot, error) {
	metric := metricOf(runs)
	most := 0.0
	for _, r := range runs {
		t := 0.0
		for _, e := range r.Result.Curve {
			t += e.Ms / 1000
		}
		most = max(most, t)
	}
	scale, unit := timeUnit(most)
	p, err := curves(runs, names, titled("Test "+metric+" over training time", shared), "test "+metric, func(r *result.Run) (pts plotter.XYs) {
		t := 0.0
		for _, e := range r.Result.Curve {
			t += e.Ms / 1000
			if e.Evaluated {
				pts = append(pts, plotter.XY{X: scale * t, Y: e.TestAcc})
			}
		}
		return pts
	})
	if p != nil {
		p.X.Label.Text = "training time (" + unit + ", evaluation excluded)"
		p.X.Min = 0
	}
	return p, err
}

// timeToAccuracy: per run, the training time until its validation
// accuracy first reached its graph's target, the same for every run of
// that graph and stated in the title; one colour per graph.
func timeToAccuracy(rows []report.Row, names map[*result.Run]string, shared string) (*plot.Plot, error) {
	rows = slices.Clone(rows)
	sort.SliceStable(rows, func(a, b int) bool { return report.Graph(rows[a].Run) < report.Graph(rows[b].Run) })
	targets := report.Targets(runsOf(rows))
	most := 0.0
	for _, r := range rows {
		most = max(most, r.TimeToTarget)
	}
	scale, unit := timeUnit(most)
	p := plot.New()
	p.Title.Text = titled("Time to accuracy: training time until validation "+metricOf(runsOf(rows))+" first reached its dataset's target\n"+targetLine(targets), shared)
	p.X.Label.Text = "training time (" + unit + ", evaluation excluded)"
	p.X.Tick.Marker = ticks{}
	// Bars run top to bottom in the rows' order; gonum counts from the bottom.
	n := len(rows)
	labels := make([]string, n)
	for i, c := 0, 0; i < n; c++ {
		g := report.Graph(rows[i].Run)
		j := i
		for j < n && report.Graph(rows[j].Run) == g {
			j++
		}
		vals := make(plotter.Values, j-i)
		for k := i; k < j; k++ {
			r := rows[k]
			at := n - 1 - k
			vals[j-1-k] = scale * max(r.TimeToTarget, 0)
			labels[at] = names[r.Run]
			if r.TimeToTarget < 0 {
				labels[at] += fmt.Sprintf(" — not reached (best %.3f)", r.Run.Result.BestValAcc)
			}
		}
		bc, err := plotter.NewBarChart(vals, vg.Points(14))
		if err != nil {
			return nil, err
		}
		bc.Horizontal = true
		bc.XMin = float64(n - j)
		bc.Color = palette[c%len(palette)]
		p.Add(bc)
		p.Legend.Add(fmt.Sprintf("%s: target %.3f", g, targets[g].Value), bc)
		i = j
	}
	p.NominalY(labels...)
	p.X.Min = 0
	p.X.Max = max(p.X.Max, 1.05*scale*most)
	return p, nil
}

// targetLine states each graph's target.
func targetLine(targets map[string]report.Target) string {
	graphs := make([]string, 0, len(targets))
	for g := range targets {
		graphs = append(graphs, g)
	}
	sort.Strings(graphs)
	parts := make([]string, len(graphs))
	for i, g := range graphs {
		parts[i] = fmt.Sprintf("%s %.3f", g, targets[g].Value)
	}
	return fmt.Sprintf("target: %.0f%% of the best any run of the dataset reached (%s)", 100*report.TargetFraction, strings.Join(parts, ", "))
}

func runsOf(rows []report.Row) []*result.Run {
	runs := make([]*result.Run, len(rows))
	for i, r := range rows {
		runs[i] = r.Run
	}
	return runs
}

// curves draws one line per run from the points it gives, on [0, 1], each
// in its own colour, dashes and markers; the markers of run i of n sit
// i/n of the way between marks, so that coinciding curves show each.
func curves(runs []*result.Run, names map[*result.Run]string, title, y string, points func(*result.Run) plotter.XYs) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.Y.Label.Text = title, y
	p.X.Tick.Marker, p.Y.Tick.Marker = ticks{}, ticks{}
	for i, r := range runs {
		pts := points(r)
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		c, d, shape := lineStyle(i)
		l.Color, l.Dashes = c, d
		l.Width = vg.Points(1.2)
		every := max(1, len(pts)/8)
		var marks plotter.XYs
		for k := every * i / len(runs); k < len(pts); k += every {
			marks = append(marks, pts[k])
		}
		s, err := plotter.NewScatter(marks)
		if err != nil {
			return nil, err
		}
		s.Color, s.Shape, s.Radius = c, shape, vg.Points(3)
		p.Add(l, s)
		p.Legend.Add(names[r], l, s)
	}
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

// broadcasts: for one run, a mark for every epoch in which (layer, root)
// broadcast (SANCUS Figure 24); gaps are skipped broadcasts.
func broadcasts(r *result.Run) (*plot.Plot, error) {
	p := plot.New()
	var what []string
	for _, f := range facets(r) {
		switch f.key {
		case "dataset", "model", "ranks", "policy", "wire":
			what = append(what, f.value)
		}
	}
	p.Title.Text = titled("Epochs in which each rank broadcast its block of each layer: gaps are skipped broadcasts", strings.Join(what, ", "))
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = "layer, root rank"
	p.X.Tick.Marker = ticks{integer: true}
	var layers []string
	for l := range r.Result.Broadcasts {
		layers = append(layers, l)
	}
	sort.Strings(layers)
	epochs := len(r.Result.Curve)
	var names []string
	y := 0.0
	for _, l := range layers {
		roots := r.Result.Broadcasts[l]
		for j := 0; j < len(roots); j++ {
			var pts plotter.XYs
			for _, ep := range roots[strconv.Itoa(j)] {
				pts = append(pts, plotter.XY{X: float64(ep + 1), Y: y})
				epochs = max(epochs, ep+1)
			}
			if len(pts) > 0 {
				s, err := plotter.NewScatter(pts)
				if err != nil {
					return nil, err
				}
				s.GlyphStyle.Radius = vg.Points(1.5)
				s.GlyphStyle.Color = palette[j%len(palette)]
				p.Add(s)
			}
			names = append(names, fmt.Sprintf("layer %s, rank %d: %d of %d sent", l, j, len(pts), len(r.Result.Curve)))
			y++
		}
	}
	rowTicks := make([]plot.Tick, len(names))
	for i, n := range names {
		rowTicks[i] = plot.Tick{Value: float64(i), Label: n}
	}
	p.Y.Tick.Marker = plot.ConstantTicks(rowTicks)
	p.Y.Min, p.Y.Max = -0.5, y-0.5
	// Room either side of the first and last epoch, so that their marks show whole.
	p.X.Min, p.X.Max = 0, float64(epochs)+max(1, float64(epochs)/40)
	p.X.Label.Text = fmt.Sprintf("epoch (1 to %d)", epochs)
	return p, nil
}

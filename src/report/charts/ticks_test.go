package charts

import (
	"math"
	"strconv"
	"testing"
)

// TestTicksRead: every axis gets four to eight labels, each the value it
// marks written without needless decimals, none repeated; whole numbers on
// an epoch axis; the ends of the range inside the labelled span.
func TestTicksRead(t *testing.T) {
	for _, c := range []struct {
		lo, hi  float64
		integer bool
		want    string // the labels, where the case pins them
	}{
		{0, 27, false, "0 5 10 15 20 25"},
		{0, 200, true, "0 50 100 150 200"},
		{1, 4, true, "1 2 3 4"},
		{0, 1, false, "0.0 0.2 0.4 0.6 0.8 1.0"},
		{0, 0.75, false, "0.0 0.1 0.2 0.3 0.4 0.5 0.6 0.7"},
		{0, 15.5, false, "0 2 4 6 8 10 12 14"},
		{1, 6, true, "1 2 3 4 5 6"},
		{0.02, 0.09, false, ""},
		{3, 3700, false, ""},
		{-5, 5, false, ""},
		{0, 1e6, false, ""},
	} {
		var labels []string
		for _, tk := range (ticks{integer: c.integer}).Ticks(c.lo, c.hi) {
			if tk.Label == "" {
				continue
			}
			v, err := strconv.ParseFloat(tk.Label, 64)
			if err != nil || math.Abs(v-tk.Value) > 1e-9*max(1, math.Abs(v)) {
				t.Errorf("%v..%v: label %q marks %v", c.lo, c.hi, tk.Label, tk.Value)
			}
			if c.integer && v != math.Trunc(v) {
				t.Errorf("%v..%v: integer axis labelled %q", c.lo, c.hi, tk.Label)
			}
			if tk.Value < c.lo-1e-9 || tk.Value > c.hi+1e-9 {
				t.Errorf("%v..%v: tick %v outside the range", c.lo, c.hi, tk.Value)
			}
			labels = append(labels, tk.Label)
		}
		if n := len(labels); n < 4 || n > 8 {
			t.Errorf("%v..%v: %d labels %v", c.lo, c.hi, n, labels)
		}
		seen := map[string]bool{}
		for _, l := range labels {
			if seen[l] {
				t.Errorf("%v..%v: label %q twice in %v", c.lo, c.hi, l, labels)
			}
			seen[l] = true
		}
		if got := join(labels); c.want != "" && got != c.want {
			t.Errorf("%v..%v: labels %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

package charts

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// ticks marks an axis at 1, 2 or 5 × 10^k, four to eight labels across
// it, each written with the decimals its step needs and no more (gonum's
// default labels as few as two marks, with two decimals, on any axis).
// integer keeps steps whole, for epochs and ranks (fewer labels where the
// range holds fewer whole numbers).
type ticks struct{ integer bool }

// step is the 1, 2 or 5 × 10^k that cuts span into at most eight.
func step(span float64, integer bool) float64 {
	if !(span > 0) || math.IsInf(span, 0) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(span/8)))
	s := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= span/8 {
			s = m * mag
			break
		}
	}
	if integer {
		s = max(1, math.Round(s))
	}
	return s
}

// Ticks implements plot.Ticker.
func (t ticks) Ticks(lo, hi float64) []plot.Tick {
	if hi < lo {
		lo, hi = hi, lo
	}
	s := step(hi-lo, t.integer)
	if hi == lo || s/5 < 1e-12*max(math.Abs(lo), math.Abs(hi)) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 6, 64)}}
	}
	decimals := max(0, int(-math.Floor(math.Log10(s)+1e-9)))
	minor := s / 5
	if m := s / math.Pow(10, math.Floor(math.Log10(s)+1e-9)); m == 2 {
		minor = s / 2
	}
	if t.integer && minor < 1 {
		minor = s
	}
	var out []plot.Tick
	eps := minor * 1e-6
	for k := math.Ceil((lo - eps) / minor); k*minor <= hi+eps; k++ {
		v := k * minor
		if math.Abs(v) < eps {
			v = 0 // no "-0"
		}
		tk := plot.Tick{Value: v}
		if r := math.Round(v / s); math.Abs(v-r*s) < eps {
			tk.Label = strconv.FormatFloat(r*s, 'f', decimals, 64)
		}
		out = append(out, tk)
	}
	return out
}

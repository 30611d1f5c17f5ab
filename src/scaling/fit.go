package scaling

import (
	"fmt"
	"math"
	"slices"
)

// Sample is one measured rank: its work and the seconds an epoch took.
type Sample struct {
	Work    Work
	Seconds float64
}

// Fit finds the rates that explain samples best: least squares, relative
// to each sample's time, on seconds = SpMM/rs + GEMM/rg + Blocks·tb +
// PassedValues·tr + Bytes·tc. A term the
// samples cannot separate from the others (their work in one ratio) or
// that comes out negative is dropped, the per-block terms kept before
// the sparse and dense flops are told apart, which share one rate when
// they cannot be. A fit that puts more on a block, a row's value or a
// byte than the engine could cost is refused (Plausible).
func Fit(samples []Sample) (Rates, error) {
	if len(samples) == 0 {
		return Rates{}, fmt.Errorf("--calibrate: no rank was measured")
	}
	feats := func(w Work) []float64 { return []float64{w.SpMM, w.GEMM, w.Blocks, w.PassedValues, w.Bytes} }
	apart := !flopsAlike(samples)
	for _, use := range fitTerms() {
		// A rate a sample must pin exactly, with no other to check it,
		// takes the noise whole: more samples than rates, or none split.
		if (use[0] == 0 && !apart) || (len(use) > 2 && len(samples) <= len(use)) {
			continue
		}
		x, ok := leastSquares(samples, use, feats)
		if !ok {
			continue
		}
		var r Rates
		for k, f := range use {
			switch f {
			case 0:
				r.SpMMGflops = 1 / x[k] / 1e9
			case 1:
				r.GEMMGflops = 1 / x[k] / 1e9
			case -1:
				r.SpMMGflops, r.GEMMGflops, r.OneRate = 1/x[k]/1e9, 1/x[k]/1e9, true
			case 2:
				r.BlockUs = x[k] * 1e6
			case 3:
				r.PassNs = x[k] * 1e9
			case 4:
				r.ByteNs = x[k] * 1e9
			}
		}
		return r, r.Plausible()
	}
	return Rates{}, fmt.Errorf("--calibrate: the measured ranks took no time")
}

// fitTerms are the sets of terms Fit tries, most first: the flops apart
// (0, 1) or at one rate (-1), with the per-block (2), per-value (3) and
// per-byte (4) costs, every subset of them, larger ones first.
func fitTerms() [][]int {
	var out [][]int
	for _, extra := range [][]int{{2, 3, 4}, {2, 3}, {2, 4}, {3, 4}, {2}, {3}, {4}, {}} {
		for _, flops := range [][]int{{0, 1}, {-1}} {
			out = append(out, append(slices.Clone(flops), extra...))
		}
	}
	return out
}

// flopsAlike reports whether the samples' sparse and dense flops are
// (nearly) in one ratio, so that no fit can tell their rates apart: the
// cosine of their two columns within 0.1% of 1.
func flopsAlike(samples []Sample) bool {
	var ss, gg, sg float64
	for _, s := range samples {
		ss += s.Work.SpMM * s.Work.SpMM
		gg += s.Work.GEMM * s.Work.GEMM
		sg += s.Work.SpMM * s.Work.GEMM
	}
	return ss == 0 || gg == 0 || sg/math.Sqrt(ss*gg) > 0.999
}

// The most a peer block and a row's value passed over can cost beyond
// their flops on any core the model is meant for: a block's bookkeeping
// (a product call, a pack, a post) is microseconds; a row passed is its
// two pointers and its output row read and written again, a few cache
// misses (500 ns a 16-float row at most). A fit above them has put a
// loaded machine's waits on the blocks.
const (
	maxBlockUs = 200
	maxPassNs  = 32
	maxByteNs  = 2 // a copy at 0.5 GB/s, far below any core's
)

// Plausible reports, naming the flags, a rate no engine could have.
func (r Rates) Plausible() error {
	const fix = "the replays were slowed by other work on this machine, not by the blocks: rerun --calibrate when it is quiet (or with more --calibrate-rounds), or give --spmm-gflops, --gemm-gflops, --block-us, --pass-ns and --byte-ns"
	switch {
	case r.BlockUs > maxBlockUs:
		return fmt.Errorf("--calibrate: the fit puts %.0f µs on each peer block, above the %d µs a block's bookkeeping could cost: %s", r.BlockUs, maxBlockUs, fix)
	case r.PassNs > maxPassNs:
		return fmt.Errorf("--calibrate: the fit puts %.1f ns on each value of a row a peer block's product passes, above the %d ns it could cost: %s", r.PassNs, maxPassNs, fix)
	case r.ByteNs > maxByteNs:
		return fmt.Errorf("--calibrate: the fit puts %.2f ns on each byte packed or taken in, above the %d ns a copy could cost: %s", r.ByteNs, maxByteNs, fix)
	}
	return nil
}

// leastSquares solves for the coefficients of the features use picks
// (−1: sparse plus dense flops), all positive, or reports that it cannot.
func leastSquares(samples []Sample, use []int, feats func(Work) []float64) ([]float64, bool) {
	k := len(use)
	if len(samples) < k {
		return nil, false
	}
	a := make([][]float64, k) // normal equations, augmented
	for i := range a {
		a[i] = make([]float64, k+1)
	}
	for _, s := range samples {
		if !(s.Seconds > 0) {
			return nil, false
		}
		// Each sample's error relative to its time: a P whose step takes
		// 3 ms counts as much as one taking 50, as the ratios the fit is
		// checked by do.
		f := feats(s.Work)
		row := make([]float64, k)
		for i, u := range use {
			if u < 0 {
				row[i] = (f[0] + f[1]) / s.Seconds
			} else {
				row[i] = f[u] / s.Seconds
			}
		}
		for i := range k {
			for j := range k {
				a[i][j] += row[i] * row[j]
			}
			a[i][k] += row[i]
		}
	}
	for c := range k { // Gauss–Jordan with partial pivoting
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		if math.Abs(a[c][c]) < 1e-12*math.Max(1, math.Abs(a[c][k])) {
			return nil, false
		}
		for r := range k {
			if r != c {
				m := a[r][c] / a[c][c]
				for j := c; j <= k; j++ {
					a[r][j] -= m * a[c][j]
				}
			}
		}
	}
	x := make([]float64, k)
	for i := range k {
		if x[i] = a[i][k] / a[i][i]; !(x[i] > 0) {
			return nil, false
		}
	}
	return x, true
}

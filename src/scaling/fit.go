package scaling

import "fmt"

// Sample is one measured rank: its work and the seconds an epoch took.
type Sample struct {
	Work    Work
	Seconds float64
}

// Fit finds the rates that explain samples best (least squares on
// seconds = SpMM/rs + GEMM/rg). Where the samples cannot tell the two
// apart (their work in one ratio, or a rate coming out negative), one
// rate for all flops is fitted instead.
func Fit(samples []Sample) (Rates, error) {
	if len(samples) == 0 {
		return Rates{}, fmt.Errorf("--calibrate: no rank was measured")
	}
	var ss, sg, gg, st, gt, ft, ff float64
	for _, s := range samples {
		a, b, t := s.Work.SpMM, s.Work.GEMM, s.Seconds
		ss, sg, gg, st, gt = ss+a*a, sg+a*b, gg+b*b, st+a*t, gt+b*t
		ff, ft = ff+(a+b)*(a+b), ft+(a+b)*t
	}
	if det := ss*gg - sg*sg; len(samples) >= 2 && det > 1e-9*ss*gg {
		x, y := (st*gg-gt*sg)/det, (gt*ss-st*sg)/det // seconds a flop
		if x > 0 && y > 0 {
			return Rates{SpMMGflops: 1 / x / 1e9, GEMMGflops: 1 / y / 1e9}, nil
		}
	}
	if ft <= 0 {
		return Rates{}, fmt.Errorf("--calibrate: the measured ranks took no time")
	}
	k := ft / ff
	return Rates{SpMMGflops: 1 / k / 1e9, GEMMGflops: 1 / k / 1e9}, nil
}

package train

import (
	"fmt"
	"math"
	"strconv"
)

// EvalEvery is when a run evaluates: after every k epochs and the last
// (0: after the last only), or EvalAuto. Parsed once from a flag or a
// configuration.
type EvalEvery int

// EvalAuto evaluates the first epoch, then every k epochs, k fixed by
// that first evaluation's cost so that evaluating takes at most a tenth of
// the run, and the last: a full-graph evaluation sends every row in fp32
// and can cost several training epochs' bytes, which at scale would
// dominate the run. k comes from counts, not clocks (autoInterval), so a
// run evaluates the same epochs, and reports the same best epoch, every
// time it is run. The compute bound assumes a training epoch computes
// every row, as full-graph and cluster epochs do; a sampled epoch
// computes its batches alone, and a full-graph evaluation there can cost
// more than half of it (give --eval-every k).
const EvalAuto EvalEvery = -1

// ParseEvalEvery reads "auto" or a count of epochs.
func ParseEvalEvery(s string) (EvalEvery, error) {
	if s == "auto" {
		return EvalAuto, nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 {
		return 0, fmt.Errorf("%q: a number of epochs (0: after the last only) or auto", s)
	}
	return EvalEvery(k), nil
}

func (v EvalEvery) String() string {
	if v == EvalAuto {
		return "auto"
	}
	return strconv.Itoa(int(v))
}

// MarshalText writes "auto" or the count.
func (v EvalEvery) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (v *EvalEvery) UnmarshalText(b []byte) (err error) {
	*v, err = ParseEvalEvery(string(b))
	return err
}

// Set and Type make an EvalEvery a command-line flag.
func (v *EvalEvery) Set(s string) error { return v.UnmarshalText([]byte(s)) }
func (v EvalEvery) Type() string        { return "k|auto" }

// due says whether epoch ep (0-based) of epochs evaluates, every k
// epochs where k is EvalAuto's interval once known (0: not yet, so
// evaluate to learn it).
func (v EvalEvery) due(ep, epochs, k int) bool {
	switch {
	case ep == epochs-1:
		return true
	case v == EvalAuto && k == 0:
		return true
	case v == EvalAuto:
		return (ep+1)%k == 0
	}
	return v > 0 && (ep+1)%int(v) == 0
}

// autoInterval is EvalAuto's k from an epoch's training bytes and its
// evaluation's, summed over the ranks. An evaluation costs at most the
// larger of half a training epoch (a forward pass against a forward and
// a backward) and its bytes' share of the epoch's bytes, ρ; evaluating
// every k epochs then takes ρ/(k+ρ) of the time, at most a tenth when
// k ≥ 9ρ.
func autoInterval(trainBytes, evalBytes float64) int {
	rho := 0.5
	if trainBytes > 0 {
		rho = max(rho, evalBytes/trainBytes)
	}
	return max(1, int(math.Ceil(9*rho)))
}

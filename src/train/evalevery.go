package train

import (
	"fmt"
	"strconv"
)

// EvalEvery is when a run evaluates: after every k epochs and the last
// (0: after the last only), or EvalAuto. Parsed once from a flag or a
// configuration.
type EvalEvery int

// EvalAuto evaluates after an epoch only while evaluation has taken at
// most evalShare of the run's time, the first and the last epoch always:
// a full-graph evaluation sends every row in fp32 and can cost several
// training epochs' bytes, which at scale would dominate the run.
const EvalAuto EvalEvery = -1

// evalShare is the most of a run's time EvalAuto spends evaluating.
const evalShare = 0.1

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

// due says whether epoch ep (0-based) of epochs evaluates. spent is the
// run's agreed seconds so far, training and evaluating, and last the
// latest evaluation's (0: none yet): every rank holds the same figures,
// so every rank decides alike.
func (v EvalEvery) due(ep, epochs int, train, eval, last float64) bool {
	switch {
	case ep == epochs-1:
		return true
	case v == EvalAuto:
		return last == 0 || eval+last <= evalShare*(train+eval+last)
	}
	return v > 0 && (ep+1)%int(v) == 0
}

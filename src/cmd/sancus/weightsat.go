package main

import "fmt"

// weightsAt is which weights --save-model writes, parsed once from
// --save-model-at.
type weightsAt uint8

const (
	atBest weightsAt = iota // after the best validation epoch: the weights the report's test accuracy is of
	atLast                  // after the last epoch trained
)

var weightsAtNames = [...]string{atBest: "best", atLast: "last"}

func (w weightsAt) String() string {
	if int(w) < len(weightsAtNames) {
		return weightsAtNames[w]
	}
	return fmt.Sprintf("weightsAt(%d)", uint8(w))
}

// Set and Type make a weightsAt a command-line flag.
func (w *weightsAt) Set(s string) error {
	for v, name := range weightsAtNames {
		if s == name {
			*w = weightsAt(v)
			return nil
		}
	}
	return fmt.Errorf("%q: best or last", s)
}
func (w weightsAt) Type() string { return "best|last" }

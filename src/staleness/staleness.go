// Package staleness decides, for one layer and one epoch, which roots
// broadcast their embedding block (ACTIVE) and which are skipped (STALE)
// because every rank's cached copy is still within the bound. One small type
// per SANCUS bound; each is wrapped by a hard cap on epochs of staleness.
//
// All ranks must reach the same decision: policies either compute it from
// state every rank holds (versions, sparsity), or share the owner's verdict
// through one small allgather (variation-gap).
package staleness

import (
	"fmt"
	"strings"
)

// Input is what a policy may look at for one (epoch, layer).
type Input struct {
	Epoch int
	Rank  int
	// Last[j] is the epoch in which root j last broadcast this layer's
	// block (-1: never, so there is no cached copy yet).
	Last []int
	// Depends[i][j]: receiver i's block Â_ij has nonzeros, i.e. rank i
	// actually uses root j's rows.
	Depends [][]bool
	// Drift returns ‖H_i − H̃_i‖_F / ‖H̃_i‖_F for this rank's own block
	// against its last broadcast copy.
	Drift func() float64
	// Gather shares one value per rank (an allgather of P floats).
	Gather func(mine float32) ([]float32, error)
}

// Policy fills active[j] for every root j.
type Policy interface {
	Name() string
	Active(in Input, active []bool) error
}

// None is CAGNET: every root broadcasts every epoch.
type None struct{}

func (None) Name() string { return "none" }
func (None) Active(in Input, active []bool) error {
	for j := range active {
		active[j] = true
	}
	return nil
}

// EpochFixed is SANCUS Algorithm 4 (ε_E): root j broadcasts when the cached
// copy is more than Eps epochs old, i.e. every Eps+1 epochs. The check is
// made right before the broadcast (the paper's Figure 14 lags by one epoch).
type EpochFixed struct{ Eps int }

func (p EpochFixed) Name() string { return fmt.Sprintf("epoch-fixed(%d)", p.Eps) }
func (p EpochFixed) Active(in Input, active []bool) error {
	for j := range active {
		active[j] = in.Last[j] < 0 || in.Epoch-in.Last[j] > p.Eps
	}
	return nil
}

// EpochAdaptive is SANCUS Algorithm 5 (ε_A). Each receiver i keeps its own
// version of root j and asks for a fresh copy when its version is more than
// Eps epochs old. Under bulk-synchronous ring broadcasts every receiver gets
// every broadcast, so all versions of j are equal and the rule on its own
// reduces to Algorithm 4. What makes it adaptive here: only receivers that
// use root j (nnz(Â_ij) > 0, the root itself included) count, so a root
// nobody depends on keeps its stale copy until the hard cap, and partitions
// with few cross edges skip more.
type EpochAdaptive struct{ Eps int }

func (p EpochAdaptive) Name() string { return fmt.Sprintf("epoch-adaptive(%d)", p.Eps) }
func (p EpochAdaptive) Active(in Input, active []bool) error {
	for j := range active {
		if in.Last[j] < 0 {
			active[j] = true
			continue
		}
		active[j] = false
		for i := range in.Depends {
			// Receiver i's version of j is in.Last[j]: it saw every broadcast.
			if in.Depends[i][j] && in.Epoch-in.Last[j] > p.Eps {
				active[j] = true
				break
			}
		}
	}
	return nil
}

// VariationGap is SANCUS Algorithm 6 (ε_H): the owner of block j measures
// the relative Frobenius distance between its current block and the copy it
// last broadcast, and broadcasts when it exceeds Eps. Only the owner can
// measure it, so verdicts are shared by one allgather of P values.
type VariationGap struct{ Eps float64 }

func (p VariationGap) Name() string { return fmt.Sprintf("variation-gap(%g)", p.Eps) }
func (p VariationGap) Active(in Input, active []bool) error {
	mine := float32(0)
	if in.Last[in.Rank] < 0 || in.Drift() > p.Eps {
		mine = 1
	}
	flags, err := in.Gather(mine)
	if err != nil {
		return fmt.Errorf("variation-gap flags: %w", err)
	}
	for j := range active {
		active[j] = flags[j] != 0
	}
	return nil
}

// Capped forces a broadcast once a cached copy is MaxStale epochs old,
// whatever the inner policy says: no bound lets an embedding go stale
// forever (the authors' code had no such cap).
type Capped struct {
	Policy
	MaxStale int
}

func (p Capped) Name() string { return fmt.Sprintf("%s,cap=%d", p.Policy.Name(), p.MaxStale) }
func (p Capped) Active(in Input, active []bool) error {
	if err := p.Policy.Active(in, active); err != nil {
		return err
	}
	for j := range active {
		if in.Last[j] < 0 || (p.MaxStale > 0 && in.Epoch-in.Last[j] >= p.MaxStale) {
			active[j] = true
		}
	}
	return nil
}

// Parse builds a policy from its command-line name and bound: none,
// epoch-fixed (alias E), epoch-adaptive (A), variation-gap (H).
func Parse(name string, eps float64, maxStale int) (Policy, error) {
	if maxStale < 1 {
		return nil, fmt.Errorf("max-stale must be ≥ 1 epoch, got %d", maxStale)
	}
	var p Policy
	switch strings.ToLower(name) {
	case "none", "":
		return None{}, nil
	case "epoch-fixed", "e", "scs-e":
		if eps < 0 || eps != float64(int(eps)) {
			return nil, fmt.Errorf("epoch-fixed needs a whole number of epochs ≥ 0, got %g", eps)
		}
		p = EpochFixed{Eps: int(eps)}
	case "epoch-adaptive", "a", "scs-a":
		if eps < 0 || eps != float64(int(eps)) {
			return nil, fmt.Errorf("epoch-adaptive needs a whole number of epochs ≥ 0, got %g", eps)
		}
		p = EpochAdaptive{Eps: int(eps)}
	case "variation-gap", "h", "scs-h":
		if eps < 0 {
			return nil, fmt.Errorf("variation-gap needs a relative bound ≥ 0, got %g", eps)
		}
		p = VariationGap{Eps: eps}
	default:
		return nil, fmt.Errorf("unknown staleness policy %q (none, epoch-fixed, epoch-adaptive, variation-gap)", name)
	}
	return Capped{Policy: p, MaxStale: maxStale}, nil
}

// UsesDrift reports whether p measures the variation gap, so the engine
// keeps the reference copies it needs only when they are used.
func UsesDrift(p Policy) bool {
	if c, ok := p.(Capped); ok {
		p = c.Policy
	}
	_, ok := p.(VariationGap)
	return ok
}

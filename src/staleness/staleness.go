// Package staleness decides, for one layer and one epoch, which roots
// broadcast their embedding block (ACTIVE) and which are skipped (STALE)
// because every rank's cached copy is still within the bound. One small type
// per SANCUS bound; each is wrapped by a hard cap on epochs of staleness.
//
// All ranks must reach the same decision. A policy is pure: it never
// communicates. Most decide from state every rank holds (versions,
// sparsity). Variation-gap needs what only a block's owner can measure, its
// drift, so it works in two phases: each owner Votes on its own block, the
// engine gathers the votes (one small allgather), and Active combines them.
package staleness

import (
	"fmt"
	"math"
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
	// Votes[j] is owner j's Vote on its own block; set (by the engine) only
	// for a policy that NeedsDrift.
	Votes []bool
}

// Policy decides which roots broadcast.
type Policy interface {
	Name() string
	// NeedsDrift reports whether Active reads the owners' votes: only then
	// does the engine measure drift and gather the votes.
	NeedsDrift() bool
	// Vote is this rank's verdict on its own block, given its drift
	// ‖H_i − H̃_i‖_F / ‖H̃_i‖_F against the copy it last broadcast.
	Vote(in Input, drift float64) bool
	// Active fills active[j] for every root j.
	Active(in Input, active []bool)
}

// versioned is the part every policy that decides from versions alone
// shares: no drift, no votes.
type versioned struct{}

func (versioned) NeedsDrift() bool         { return false }
func (versioned) Vote(Input, float64) bool { return false }

// None is CAGNET: every root broadcasts every epoch.
type None struct{ versioned }

func (None) Name() string { return "none" }
func (None) Active(in Input, active []bool) {
	for j := range active {
		active[j] = true
	}
}

// EpochFixed is SANCUS Algorithm 4 (ε_E): root j broadcasts when the cached
// copy is more than Eps epochs old, i.e. every Eps+1 epochs. The check is
// made right before the broadcast (the paper's Figure 14 lags by one epoch).
type EpochFixed struct {
	versioned
	Eps int
}

func (p EpochFixed) Name() string { return fmt.Sprintf("epoch-fixed(%d)", p.Eps) }
func (p EpochFixed) Active(in Input, active []bool) {
	for j := range active {
		active[j] = in.Last[j] < 0 || in.Epoch-in.Last[j] > p.Eps
	}
}

// EpochAdaptive is SANCUS Algorithm 5 (ε_A). Each receiver i keeps its own
// version of root j and asks for a fresh copy when its version is more than
// Eps epochs old. Under bulk-synchronous ring broadcasts every receiver gets
// every broadcast, so all versions of j are equal and the rule on its own
// reduces to Algorithm 4. What makes it adaptive here: only receivers that
// use root j (nnz(Â_ij) > 0, the root itself included) count, so a root
// nobody depends on keeps its stale copy until the hard cap, and partitions
// with few cross edges skip more.
type EpochAdaptive struct {
	versioned
	Eps int
}

func (p EpochAdaptive) Name() string { return fmt.Sprintf("epoch-adaptive(%d)", p.Eps) }
func (p EpochAdaptive) Active(in Input, active []bool) {
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
}

// VariationGap is SANCUS Algorithm 6 (ε_H): the owner of block j measures
// the relative Frobenius distance between its current block and the copy it
// last broadcast, and broadcasts when it exceeds Eps. Only the owner can
// measure it, so each owner votes and Active reads the gathered votes.
type VariationGap struct{ Eps float64 }

func (p VariationGap) Name() string     { return fmt.Sprintf("variation-gap(%g)", p.Eps) }
func (p VariationGap) NeedsDrift() bool { return true }
func (p VariationGap) Vote(in Input, drift float64) bool {
	return in.Last[in.Rank] < 0 || drift > p.Eps
}
func (p VariationGap) Active(in Input, active []bool) { copy(active, in.Votes) }

// Capped forces a broadcast once a cached copy is MaxStale epochs old,
// whatever the inner policy says: no bound lets an embedding go stale
// forever (the authors' code had no such cap).
type Capped struct {
	Policy
	MaxStale int
}

func (p Capped) Name() string { return fmt.Sprintf("%s,cap=%d", p.Policy.Name(), p.MaxStale) }
func (p Capped) Active(in Input, active []bool) {
	p.Policy.Active(in, active)
	for j := range active {
		if in.Last[j] < 0 || (p.MaxStale > 0 && in.Epoch-in.Last[j] >= p.MaxStale) {
			active[j] = true
		}
	}
}

// Kind is a policy family, parsed once from a flag, a configuration or a
// results file; what differs between families is asked of it, never of a
// name.
type Kind uint8

const (
	KindNone Kind = iota
	KindEpochFixed
	KindEpochAdaptive
	KindVariationGap
)

var kindNames = [...]string{KindNone: "none", KindEpochFixed: "epoch-fixed", KindEpochAdaptive: "epoch-adaptive", KindVariationGap: "variation-gap"}

// kindAliases are the papers' short names (SANCUS's SCS-E, SCS-A, SCS-H).
var kindAliases = map[string]Kind{"": KindNone, "e": KindEpochFixed, "scs-e": KindEpochFixed,
	"a": KindEpochAdaptive, "scs-a": KindEpochAdaptive, "h": KindVariationGap, "scs-h": KindVariationGap}

// ParseKind reads a policy's name, or its alias, in any case.
func ParseKind(s string) (Kind, error) {
	s = strings.ToLower(s)
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	if k, ok := kindAliases[s]; ok {
		return k, nil
	}
	return KindNone, fmt.Errorf("unknown staleness policy %q (none, epoch-fixed, epoch-adaptive, variation-gap)", s)
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText writes the policy's full name, whatever alias it was given as.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a policy's name or alias.
func (k *Kind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseKind(string(b))
	return err
}

// Set and Type make a Kind a command-line flag.
func (k *Kind) Set(s string) error { return k.UnmarshalText([]byte(s)) }
func (k Kind) Type() string        { return "policy" }

// Skips: the policy may let a root skip its broadcast.
func (k Kind) Skips() bool { return k != KindNone }

// DefaultBound is the bound a policy gets when none is given (a negative
// bound): one epoch for the epoch policies, a relative change of 0.03 for
// variation-gap (SANCUS's evaluation).
func (k Kind) DefaultBound() float64 {
	switch k {
	case KindVariationGap:
		return 0.03
	case KindEpochFixed, KindEpochAdaptive:
		return 1
	}
	return 0
}

// Policy builds the policy of this family with bound eps (negative: the
// family's DefaultBound), capped at maxStale epochs.
func (k Kind) Policy(eps float64, maxStale int) (Policy, error) {
	if maxStale < 1 {
		return nil, fmt.Errorf("max-stale must be ≥ 1 epoch, got %d", maxStale)
	}
	if eps < 0 {
		eps = k.DefaultBound()
	}
	var p Policy
	switch k {
	case KindNone:
		return None{}, nil
	case KindEpochFixed:
		if eps != float64(int(eps)) {
			return nil, fmt.Errorf("epoch-fixed needs a whole number of epochs ≥ 0, got %g", eps)
		}
		p = EpochFixed{Eps: int(eps)}
	case KindEpochAdaptive:
		if eps != float64(int(eps)) {
			return nil, fmt.Errorf("epoch-adaptive needs a whole number of epochs ≥ 0, got %g", eps)
		}
		p = EpochAdaptive{Eps: int(eps)}
	case KindVariationGap:
		if math.IsInf(eps, 0) || math.IsNaN(eps) {
			return nil, fmt.Errorf("variation-gap needs a finite relative bound ≥ 0, got %g", eps)
		}
		p = VariationGap{Eps: eps}
	default:
		return nil, fmt.Errorf("unknown staleness policy %v", k)
	}
	return Capped{Policy: p, MaxStale: maxStale}, nil
}

package model

import "fmt"

// Arch is a model family, parsed once from a flag, a configuration or a
// model file; what differs between families is asked of it, never of a
// name.
type Arch uint8

const (
	ArchGCN  Arch = iota // Kipf and Welling: Â·H·W
	ArchSAGE             // GraphSAGE-mean: H·W_root + mean of the neighbours·W
	ArchGAT              // Veličković et al.: attention heads, ELU
)

var archNames = [...]string{ArchGCN: "gcn", ArchSAGE: "sage", ArchGAT: "gat"}

// ParseArch reads a family's name: gcn (also ""), sage or gat.
func ParseArch(s string) (Arch, error) {
	if s == "" {
		return ArchGCN, nil
	}
	for a, name := range archNames {
		if s == name {
			return Arch(a), nil
		}
	}
	return ArchGCN, fmt.Errorf("unknown model %q (gcn, sage or gat)", s)
}

func (a Arch) String() string {
	if int(a) < len(archNames) {
		return archNames[a]
	}
	return fmt.Sprintf("Arch(%d)", uint8(a))
}

// MarshalText writes the family's name, as configurations and results
// have always held it.
func (a Arch) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText reads a family's name.
func (a *Arch) UnmarshalText(b []byte) (err error) {
	*a, err = ParseArch(string(b))
	return err
}

// Set and Type make an Arch a command-line flag.
func (a *Arch) Set(s string) error { return a.UnmarshalText([]byte(s)) }
func (a Arch) Type() string        { return "model" }

// ReadsAX: layer 1 is Â·X·W, so it can take the precomputed ÂX.
func (a Arch) ReadsAX() bool { return a == ArchGCN }

// ReadsMeanX: layer 1 is mean_j(X_j)·W + X_i·Root, so it can take the
// precomputed neighbours' mean D⁻¹AX (GraphSAGE-mean).
func (a Arch) ReadsMeanX() bool { return a == ArchSAGE }

// Attends: a layer's aggregation weights are attention coefficients
// computed from both endpoints, not fixed entries of Â.
func (a Arch) Attends() bool { return a == ArchGAT }

// HasRoot: a layer adds its own rows' transform H·W_root to the
// aggregated neighbours (GraphSAGE's root weight).
func (a Arch) HasRoot() bool { return a == ArchSAGE }

// ELU: hidden layers apply ELU, as GAT was published; GCN and GraphSAGE
// apply ReLU.
func (a Arch) ELU() bool { return a == ArchGAT }

// DecaysAll: weight decay on every parameter, as GAT was published; GCN
// and GraphSAGE decay the first layer's weights only (Kipf and Welling).
func (a Arch) DecaysAll() bool { return a == ArchGAT }

package partition

import (
	"fmt"
	"strings"
)

// Kind is a partitioner, parsed once from a flag; what differs between
// partitioners is asked of it, never of a name.
type Kind uint8

const (
	KindContiguous Kind = iota // keep the node order; rows are cut by nonzeros at shard time
	KindRandom                 // seeded deal, equal sizes
	KindSpring                 // CATGNN's streaming clustering
	KindGrem                   // Armada's streaming recursive bisection
	KindDBH                    // degree-based hashing of edges
	KindHDRF                   // high-degree-replicated-first edge streaming
	KindFile                   // one part id per line (e.g. gpmetis output)
	KindByteGNN                // ByteGNN's multi-hop blocks balanced by split (bytegnn.go)
)

var kindNames = [...]string{KindContiguous: "contiguous", KindRandom: "random", KindSpring: "spring", KindGrem: "grem",
	KindDBH: "dbh", KindHDRF: "hdrf", KindFile: "file", KindByteGNN: "bytegnn"}

// Names lists the partitioners.
var Names = kindNames[:]

// EdgeKinds are the edge partitioners.
var EdgeKinds = []Kind{KindDBH, KindHDRF}

// ParseKind reads a partitioner's name (case does not matter; "" is
// contiguous).
func ParseKind(s string) (Kind, error) {
	s = strings.ToLower(s)
	if s == "" {
		return KindContiguous, nil
	}
	for k, name := range kindNames {
		if s == name {
			return Kind(k), nil
		}
	}
	return KindContiguous, fmt.Errorf("unknown partitioner %q (%s)", s, strings.Join(Names, ", "))
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText writes the partitioner's name, as shard metadata holds it.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a partitioner's name.
func (k *Kind) UnmarshalText(b []byte) (err error) {
	*k, err = ParseKind(string(b))
	return err
}

// Set and Type make a Kind a command-line flag.
func (k *Kind) Set(s string) error { return k.UnmarshalText([]byte(s)) }
func (k Kind) Type() string        { return "partitioner" }

// Reorders: the partitioner gives every node a part (contiguous keeps the
// node order and leaves the cut to the shard writer).
func (k Kind) Reorders() bool { return k != KindContiguous }

// CutsEdges: an edge partitioner (a node then goes where most of its
// edges went).
func (k Kind) CutsEdges() bool { return k == KindDBH || k == KindHDRF }

// Refines: Options.Refine's label propagation applies afterwards.
func (k Kind) Refines() bool { return k == KindSpring || k == KindGrem }

// Given: the parts come from outside, so their sizes are the file's and
// are not checked against β.
func (k Kind) Given() bool { return k == KindFile }

// BalancesSplits: the partitioner reads the training, validation and test
// split (Options.Splits) and makes each split's count equal across parts;
// moving nodes afterwards for nonzeros would undo that, so an automatic
// balance keeps its parts.
func (k Kind) BalancesSplits() bool { return k == KindByteGNN }

package train

import "fmt"

// BatchMode is what a step trains on, parsed once from a flag or a
// configuration and asked what it implies.
type BatchMode uint8

const (
	BatchGlobal   BatchMode = iota // the whole graph every step
	BatchClusters                  // a draw of the shards' clusters each step (batch.go)
	BatchSampled                   // sampled neighbourhoods of a draw of training vertices (sampled.go)
)

var batchNames = [...]string{BatchGlobal: "global", BatchClusters: "clusters", BatchSampled: "sampled"}

// ParseBatchMode reads a batch mode's name: global (also ""), clusters or
// sampled.
func ParseBatchMode(s string) (BatchMode, error) {
	if s == "" {
		return BatchGlobal, nil
	}
	for m, name := range batchNames {
		if s == name {
			return BatchMode(m), nil
		}
	}
	return BatchGlobal, fmt.Errorf("unknown batch %q (global, clusters or sampled)", s)
}

func (m BatchMode) String() string {
	if int(m) < len(batchNames) {
		return batchNames[m]
	}
	return fmt.Sprintf("BatchMode(%d)", uint8(m))
}

// MarshalText writes the mode's name.
func (m BatchMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a mode's name.
func (m *BatchMode) UnmarshalText(b []byte) (err error) {
	*m, err = ParseBatchMode(string(b))
	return err
}

// Set and Type make a BatchMode a command-line flag.
func (m *BatchMode) Set(s string) error { return m.UnmarshalText([]byte(s)) }
func (m BatchMode) Type() string        { return "batch" }

// Clusters: each step trains a batch of clusters, whose Â is renormalized.
func (m BatchMode) Clusters() bool { return m == BatchClusters }

// Sampled: each step trains mini-batches of sampled k-hop neighbourhoods,
// computed by each rank alone on the features it fetched.
func (m BatchMode) Sampled() bool { return m == BatchSampled }

// ReadsX: a step reads X itself, not a precomputed product with it (a
// cluster batch renormalizes Â; a sampled block is not Â).
func (m BatchMode) ReadsX() bool { return m != BatchGlobal }

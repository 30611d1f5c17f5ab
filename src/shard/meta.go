package shard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"sancus/src/atomicfile"
	"sancus/src/partition"
)

// MetaFile describes a shard directory as a whole, for people and tools;
// each shard file is self-describing and checked on its own.
const MetaFile = "meta.json"

// Meta is the content of MetaFile.
type Meta struct {
	Dataset string `json:"dataset"`
	// Data is the dataset's files, their sizes and how they were read (a
	// model trained on these shards keeps it; predict compares).
	Data        string `json:"data,omitempty"`
	Parts       int    `json:"parts"`
	Nodes       int    `json:"nodes"`
	Features    int    `json:"features"`
	Classes     int    `json:"classes"`
	Precomputed bool   `json:"precomputed_ax"`
	// How the dataset was read: feature normalization and the split drawn
	// for data that ships none.
	NormalizeFeatures bool              `json:"normalize_features"`
	Split             string            `json:"split,omitempty"`
	SplitSeed         uint64            `json:"split_seed,omitempty"`
	SplitName         string            `json:"split_name,omitempty"`
	Offsets           []int64           `json:"offsets"`
	Clusters          int               `json:"clusters,omitempty"` // prepared for cluster-batch training
	Partitioner       string            `json:"partitioner"`
	Partition         partition.Metrics `json:"partition"`
	PartitionS        float64           `json:"partition_seconds"`
	PeakRSSMB         float64           `json:"peak_rss_mb"`
	CompulsoryMB      float64           `json:"compulsory_mb"` // the largest part's Â and ÂX rows and the features, held at once
	Created           time.Time         `json:"created"`
	Set               string            `json:"set"` // every shard's Shard.Set, in hex
}

// WriteMeta writes dir/meta.json atomically. prepare writes it last, so its
// presence says the directory is complete.
func WriteMeta(dir string, m Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, MetaFile), append(b, '\n'))
}

// maxMeta bounds meta.json: a million parts' offsets take 20 MB.
const maxMeta = 64 << 20

// ReadMeta reads dir/meta.json and checks it against itself: part count,
// offsets and node count agree. Its errors say the directory is
// incomplete or corrupt, in the words OpenDir uses.
func ReadMeta(dir string) (Meta, error) {
	var m Meta
	path := filepath.Join(dir, MetaFile)
	b, err := atomicfile.ReadAll(path, maxMeta)
	if errors.Is(err, fs.ErrNotExist) {
		return m, fmt.Errorf("shard directory %s is incomplete: it has no %s, which sancus prepare writes last (an interrupted prepare, or a partial copy): %w; run sancus prepare again", dir, MetaFile, err)
	}
	if err != nil {
		return m, incomplete(dir, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, incomplete(dir, fmt.Errorf("%s: %w", path, err))
	}
	if err := m.check(); err != nil {
		return m, incomplete(dir, fmt.Errorf("%s: %w", path, err))
	}
	return m, nil
}

func incomplete(dir string, err error) error {
	return fmt.Errorf("shard directory %s is incomplete or corrupt: %w; run sancus prepare again", dir, err)
}

// check holds a meta.json to itself.
func (m *Meta) check() error {
	if m.Parts < 1 || m.Parts > maxParts {
		return fmt.Errorf("parts %d (want 1 to %d)", m.Parts, maxParts)
	}
	if len(m.Offsets) != m.Parts+1 {
		return fmt.Errorf("parts %d, but %d offsets (want parts+1)", m.Parts, len(m.Offsets))
	}
	if m.Nodes < 1 || m.Offsets[0] != 0 || m.Offsets[m.Parts] != int64(m.Nodes) {
		return fmt.Errorf("offsets %v do not run from 0 to its %d nodes", clipOffsets(m.Offsets), m.Nodes)
	}
	for r := range m.Parts {
		if m.Offsets[r+1] < m.Offsets[r] {
			return fmt.Errorf("offsets decrease at part %d", r)
		}
	}
	return nil
}

func clipOffsets(o []int64) string {
	if len(o) <= 8 {
		return fmt.Sprint(o)
	}
	return fmt.Sprintf("%v … (%d)", o[:8], len(o))
}

// IsDir reports whether dir looks like a shard directory: it has a
// meta.json or a shard file, complete or not.
func IsDir(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, MetaFile)); err == nil {
		return true
	}
	m, _ := filepath.Glob(filepath.Join(dir, "shard-*-of-*.bin"))
	return len(m) > 0
}

// OpenDir checks a shard directory whole before a shard of it is read:
// meta.json is there and sound, and every shard file it promises is a
// regular file. Every reader of a shard directory (training on each
// rank, predict, info) goes through it, so all refuse one alike.
func OpenDir(dir string) (Meta, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return Meta{}, fmt.Errorf("shard directory: %w", err)
	}
	if !st.IsDir() {
		return Meta{}, fmt.Errorf("shard directory %s: not a directory", dir)
	}
	if !IsDir(dir) {
		return Meta{}, fmt.Errorf("shard directory %s: %s and shard files not found: run sancus prepare first", dir, MetaFile)
	}
	m, err := ReadMeta(dir)
	if err != nil {
		return m, err
	}
	for r := range m.Parts {
		path := filepath.Join(dir, FileName(r, m.Parts))
		st, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return m, fmt.Errorf("shard %s: missing from %s, which was prepared for %d ranks (%s): the file was deleted or not copied; run sancus prepare again",
				path, dir, m.Parts, MetaFile)
		}
		if err != nil {
			return m, incomplete(dir, err)
		}
		if !st.Mode().IsRegular() {
			return m, incomplete(dir, fmt.Errorf("%s: not a regular file", path))
		}
	}
	return m, nil
}

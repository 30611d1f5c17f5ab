package shard

import (
	"encoding/json"
	"fmt"
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

// ReadMeta reads dir/meta.json.
func ReadMeta(dir string) (Meta, error) {
	var m Meta
	path := filepath.Join(dir, MetaFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

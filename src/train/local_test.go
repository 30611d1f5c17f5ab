package train

import (
	"sancus/src/graph"
	"sancus/src/prepare"
)

// The tests' runs of a whole dataset: split into parts shards in memory and
// trained as goroutine ranks (RunShards). The command has its own
// (src/cmd/sancus), since prepare is not the engine's to call.

// RunInProcess trains ds as parts in-process ranks, contiguous ranges.
func RunInProcess(ds *graph.Dataset, parts int, cfg Config) (Outcome, error) {
	return RunPartitioned(ds, nil, parts, cfg)
}

// RunPartitioned is RunInProcess on a partition (assign[v] = rank of node
// v; nil: contiguous ranges): nodes are reordered part by part.
func RunPartitioned(ds *graph.Dataset, assign []int32, parts int, cfg Config) (Outcome, error) {
	return runPrepared(ds, parts, cfg, prepare.Options{Precompute: cfg.Precomputed(), Parts: assign})
}

// RunClustered is RunInProcess with the nodes cut into k clusters
// (clusters[v]), whole clusters per rank, for cluster-batch training.
func RunClustered(ds *graph.Dataset, clusters []int32, k, parts int, cfg Config) (Outcome, error) {
	assign, err := prepare.ClusterRanks(clusters, k, parts)
	if err != nil {
		return Outcome{}, err
	}
	return runPrepared(ds, parts, cfg, prepare.Options{Precompute: cfg.Precomputed(), Parts: assign, Clusters: clusters, NumClusters: k})
}

func runPrepared(ds *graph.Dataset, parts int, cfg Config, opt prepare.Options) (Outcome, error) {
	if err := cfg.Validate(); err != nil {
		return Outcome{}, err
	}
	prep, err := prepare.InMemory(ds, parts, opt)
	if err != nil {
		return Outcome{}, err
	}
	shards, err := prep.Shards()
	if err != nil {
		return Outcome{}, err
	}
	return RunShards(shards, cfg)
}

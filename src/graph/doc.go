// Package graph reads graph datasets (Matrix Market, SNAP edge lists, METIS
// graph files, gnn-benchmark npz archives, OGB's node-property layout,
// labels and splits), builds the symmetric adjacency in CSR form,
// normalizes it to Â = D^-1/2 (A+I) D^-1/2, and generates synthetic graphs
// (planted partition, R-MAT) in the same on-disk layout.
//
// Every reader reports malformed input as an error naming the file and line
// (or the archive and array), and checks sizes a header declares against
// the file and the machine before allocating for them.
//
// # Datasets
//
// A dataset is one of:
//   - a directory with graph.mtx (Matrix Market), edges.txt (SNAP) or one
//     *.graph (METIS); optional features.mtx (else one-hot features);
//     labels.txt; optional train.txt, val.txt, test.txt;
//   - a gnn-benchmark .npz archive (or a directory holding one):
//     adj_data/indices/indptr/shape (CSR adjacency), attr_* (CSR features)
//     or a dense features array, labels; every member's CRC-32 is checked;
//   - OGB's node-property layout as a dataset unpacks: raw/edge.csv[.gz],
//     raw/num-node-list.csv[.gz], raw/node-feat.csv[.gz],
//     raw/node-label.csv[.gz], split/<name>/{train,valid,test}.csv[.gz]
//     (--split-name picks one when there are several). `sancus gen
//     --format ogb` writes this layout.
//
// labels.npy and train/val/test.npy are read beside any format. Data
// without a split gets a seeded one: --split random (10/10/80, the
// default) or --split planetoid (20 per class, 500 validation, 1,000 test).
// Edges are symmetrized, duplicates and self loops dropped. Multi-label
// targets come from labels-multi.txt (line i: node i's class ids), a 0/1
// labels.mtx, or OGB's multi-column node-label.csv.
//
// # Memory
//
// `prepare` streams every format: edge arrays and CSVs are read in chunks,
// never whole. A degree pass cuts the row ranges, a second pass buckets
// each part's edges into a temporary file, and each part is then
// deduplicated, normalized and written on its own, so memory is O(|V| +
// nnz(X) + one part's edges), never the whole edge list (ÂX needs the
// features in memory); its meta.json records what it held at once and its
// peak. A rank holds its shard's data once: the shard file streams into
// the arrays training uses, and a ÂX denser than 1/4 is stored dense and
// read straight into the matrix layer 1 multiplies. Of X and ÂX a rank
// keeps only the one layer 1 reads.
package graph

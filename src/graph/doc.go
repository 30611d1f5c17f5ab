// Package graph reads graph datasets (Matrix Market, SNAP edge lists, METIS
// graph files, labels and splits), builds the symmetric adjacency in CSR
// form, normalizes it to Â = D^-1/2 (A+I) D^-1/2, and generates synthetic
// graphs (planted partition, R-MAT) in the same on-disk layout.
//
// Every reader reports malformed input as an error naming the file and line.
package graph

// Package kernels holds the CPU compute kernels of sancus: CSR×dense SpMM,
// dense GEMM in the three shapes a GCN needs, fused elementwise operations
// and a STREAM-like triad used as the bandwidth reference in benchmarks.
//
// Kernels split their work over row ranges and run them on goroutines; the
// inner loops are C (compiled with and without AVX2, chosen at run time).
// Every kernel is deterministic: the result does not depend on the number of
// threads, so runs can be compared bit for bit.
package kernels

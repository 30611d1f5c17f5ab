// Package kernels holds the CPU compute kernels of sancus: CSR×dense SpMM
// (cpu.c), dense GEMM in the shapes a GNN needs with dropout drawn inside
// (gemm.c), fused elementwise operations, the loss, the packing of listed
// rows for the sparse exchange (GatherRows, ScatterRows), and a STREAM-like triad
// and an in-order read (SumRepeated) used as bandwidth references in
// benchmarks. The CPU backend also has the optional row operations
// (RowOps, RowInput): GEMMs, the bias, column sums and the loss gradient at
// a list of rows, for a consumer that reads only those; and the fused
// passes (Fused): dropout's and ReLU's backward with the bias gradient in
// one pass; and GAT's attention (Attention, gat.c: scores a chunk of edges
// at a time, exponentials on vectors from vexp.h). Timed wraps any backend
// to time its calls by class and count their compulsory bytes.
//
// Kernels split their work over row ranges and run them on goroutines; the
// inner loops are C, compiled for baseline x86-64, AVX2 and AVX-512 and
// chosen at run time (simd.h; LimitSIMD lowers the level for tests).
// Every kernel is deterministic: the result does not depend on the number of
// threads, so runs can be compared bit for bit.
package kernels

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
// at a time, exponentials on vectors from vexp_body.h). Timed wraps any backend
// to time its calls by class and count their compulsory bytes.
//
// Kernels cut their work into row ranges, several a thread, which the
// threads' goroutines take in turn (parallel.go); the inner loops are C,
// compiled for baseline x86-64, AVX2 and AVX-512 and chosen at run time
// (simd.h; LimitSIMD lowers the level for tests). Every kernel is
// deterministic: the result depends neither on the number of threads nor
// on which thread took which range, so runs can be compared bit for bit.
package kernels

// Package cuda is the GPU backend of sancus's kernels (kernels.Backend),
// built only with the cuda build tag (`make cuda`): CSR SpMM, dense
// products, activations, dropout and GAT's attention as CUDA kernels (sancus.cu, compiled to
// PTX by nvcc and loaded through the driver API), with every matrix the
// engine computes — the per-(layer, root) embedding caches included — kept
// in device memory. Masks and reductions match the CPU kernels, so a GPU
// run reproduces the CPU run's losses. Without a GPU, the kernels package's
// TestCUDAAttentionEmulated compiles GAT's kernels for the CPU
// (testdata/emulate.cpp) and checks them against the CPU's.
//
// gorgonia.org/cu v0.9.6 is not used: it does not compile against CUDA 13's
// cuda.h (cuCtxCreate, cuMemAdvise and cuMemPrefetchAsync changed their
// signatures), so driver.c binds the dozen driver calls this needs itself.
package cuda

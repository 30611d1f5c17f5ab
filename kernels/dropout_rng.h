// The dropout random stream, shared by the CPU kernels (dropout.c) and the
// CUDA kernels (cuda/sancus.cu), so that both draw identical masks: a row
// key from a counter-based hash of (seed, stream, node id), then a
// xorshift64* stream whose draw q holds the 16-bit lanes of columns
// 4q..4q+3. dropout.go's Keep is the same function in Go.
#ifndef SC_DROPOUT_RNG_H
#define SC_DROPOUT_RNG_H
#include <stdint.h>

#ifdef __CUDACC__
#define SC_RNG __device__ __forceinline__
#else
#define SC_RNG static inline
#endif

SC_RNG uint64_t sc_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

SC_RNG uint64_t sc_row_key(uint64_t seed, uint64_t stream, uint64_t row) {
  uint64_t k = sc_mix64(seed ^ sc_mix64(stream + 0x632be59bd9b4e019ULL * (row + 1)));
  return k ? k : 1; // xorshift state must be non-zero
}

SC_RNG uint64_t sc_next_word(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545f4914f6cdd1dULL;
}

#endif

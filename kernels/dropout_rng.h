// The dropout draws, shared by the CPU kernels (gemm.c, dropout.c) and the
// CUDA kernels (cuda/sancus.cu), so that both draw identical masks; Go's
// matrix.Mask.Keep is the same function. A row key is a 64-bit hash of
// (seed, stream, node id) folded to 32 bits; column c's 16-bit draw is half
// of a 32-bit avalanche hash of (key, pair index), columns c and c+16 of
// each 32-column group sharing one hash. Every draw is independent of the
// others, so the loops vectorize and nothing is replayed to reach column c.
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

SC_RNG uint32_t sc_drop_key(uint64_t seed, uint64_t stream, uint64_t row) {
  const uint64_t k = sc_mix64(seed ^ sc_mix64(stream + 0x632be59bd9b4e019ULL * (row + 1)));
  return (uint32_t)k ^ (uint32_t)(k >> 32);
}

// sc_hash32 is a 32-bit avalanche hash of (key, i): the dropout draws and
// the wire's rounding draws (quant.c) both come from it.
// SC_HASH32_MIX is its body after the first product, for a scalar or a
// vector of lanes (gemm.c's drop_rows hashes 16 at a time in registers,
// forming the product as a sum).
#define SC_HASH32_MIX(h)                                                       \
  do {                                                                         \
    (h) ^= (h) >> 16;                                                          \
    (h) *= 0x7feb352du;                                                        \
    (h) ^= (h) >> 15;                                                          \
    (h) *= 0x846ca68bu;                                                        \
    (h) ^= (h) >> 16;                                                          \
  } while (0)

SC_RNG uint32_t sc_hash32(uint32_t key, uint32_t i) {
  uint32_t h = i * 0x9e3779b9u ^ key;
  SC_HASH32_MIX(h);
  return h;
}

// sc_drop_draw is column c's 16-bit draw: pair (c/32)·16 + c%16, low half
// for the first 16 columns of the group, high half for the next 16.
SC_RNG uint32_t sc_drop_draw(uint32_t key, uint64_t c) {
  const uint32_t h = sc_hash32(key, (uint32_t)((c >> 5) * 16 + (c & 15)));
  return (c & 16) ? h >> 16 : h & 0xffff;
}

#endif

// The kernels are written once as inline bodies and compiled twice: with
// AVX2+FMA and for baseline x86-64 (or the host ISA elsewhere). Dispatch is
// decided once at run time, so a binary built on a login node never executes
// an instruction the compute node lacks.
#include "cpu.h"
#include <string.h>

#define SPMM_BODY(N)                                                          \
  for (int64_t r = r0; r < r1; r++) {                                          \
    float *c = C + r * (N);                                                    \
    if (!acc) memset(c, 0, sizeof(float) * (N));                               \
    for (int64_t p = rowptr[r]; p < rowptr[r + 1]; p++) {                      \
      const float v = val[p];                                                  \
      const float *b = B + (int64_t)col[p] * (N);                              \
      for (int64_t j = 0; j < (N); j++) c[j] += v * b[j];                      \
    }                                                                          \
  }

#define GEMM_NN_BODY(N)                                                       \
  for (int64_t r = r0; r < r1; r++) {                                          \
    float *c = C + r * (N);                                                    \
    const float *a = A + r * k;                                                \
    if (!acc) memset(c, 0, sizeof(float) * (N));                               \
    for (int64_t q = 0; q < k; q++) {                                          \
      const float v = a[q];                                                    \
      if (v == 0.0f) continue;                                                 \
      const float *b = B + q * (N);                                            \
      for (int64_t j = 0; j < (N); j++) c[j] += v * b[j];                      \
    }                                                                          \
  }

#define GEMM_TN_BODY(N)                                                       \
  for (int64_t r = r0; r < r1; r++) {                                          \
    const float *a = A + r * k;                                                \
    const float *b = B + r * (N);                                              \
    for (int64_t q = 0; q < k; q++) {                                          \
      const float v = a[q];                                                    \
      if (v == 0.0f) continue;                                                 \
      float *c = C + q * (N);                                                  \
      for (int64_t j = 0; j < (N); j++) c[j] += v * b[j];                      \
    }                                                                          \
  }

// Widths used by GCNs (hidden and class counts) get a compile-time trip count
// so the inner loop becomes straight-line vector code.
#define DISPATCH_WIDTH(BODY)                                                  \
  switch (n) {                                                                 \
  case 8: BODY(8); break;                                                      \
  case 16: BODY(16); break;                                                    \
  case 32: BODY(32); break;                                                    \
  case 64: BODY(64); break;                                                    \
  case 128: BODY(128); break;                                                  \
  default: BODY(n); break;                                                     \
  }

#define DEFINE_KERNELS(SUFFIX, ATTR)                                          \
  ATTR static void spmm_##SUFFIX(const int64_t *rowptr, const int32_t *col,    \
                                 const float *val, const float *B, float *C,   \
                                 int64_t n, int64_t r0, int64_t r1, int acc) { \
    DISPATCH_WIDTH(SPMM_BODY)                                                  \
  }                                                                            \
  ATTR static void gemm_nn_##SUFFIX(const float *A, const float *B, float *C,  \
                                    int64_t k, int64_t n, int64_t r0,          \
                                    int64_t r1, int acc) {                     \
    DISPATCH_WIDTH(GEMM_NN_BODY)                                               \
  }                                                                            \
  ATTR static void gemm_tn_##SUFFIX(const float *A, const float *B, float *C,  \
                                    int64_t k, int64_t n, int64_t r0,          \
                                    int64_t r1) {                              \
    DISPATCH_WIDTH(GEMM_TN_BODY)                                               \
  }                                                                            \
  ATTR static void triad_##SUFFIX(float *a, const float *b, const float *c,    \
                                  float s, int64_t i0, int64_t i1) {           \
    for (int64_t i = i0; i < i1; i++) a[i] = b[i] + s * c[i];                  \
  }

DEFINE_KERNELS(base, )

#if defined(__x86_64__) && defined(__GNUC__)
DEFINE_KERNELS(avx2, __attribute__((target("avx2,fma"))))
static int level = -1;
int sc_simd_level(void) {
  if (level < 0) {
    __builtin_cpu_init();
    level = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? 1 : 0;
  }
  return level;
}
#define PICK(name, ...) \
  do { if (sc_simd_level()) name##_avx2(__VA_ARGS__); else name##_base(__VA_ARGS__); } while (0)
#else
int sc_simd_level(void) { return 0; }
#define PICK(name, ...) name##_base(__VA_ARGS__)
#endif

void sc_spmm(const int64_t *rowptr, const int32_t *col, const float *val,
             const float *B, float *C, int64_t n, int64_t r0, int64_t r1, int acc) {
  PICK(spmm, rowptr, col, val, B, C, n, r0, r1, acc);
}
void sc_gemm_nn(const float *A, const float *B, float *C, int64_t k, int64_t n,
                int64_t r0, int64_t r1, int acc) {
  PICK(gemm_nn, A, B, C, k, n, r0, r1, acc);
}
void sc_gemm_tn(const float *A, const float *B, float *C, int64_t k, int64_t n,
                int64_t r0, int64_t r1) {
  PICK(gemm_tn, A, B, C, k, n, r0, r1);
}
void sc_triad(float *a, const float *b, const float *c, float s, int64_t i0, int64_t i1) {
  PICK(triad, a, b, c, s, i0, i1);
}

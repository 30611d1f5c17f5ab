// The kernels are written once as inline bodies and compiled twice: with
// AVX2+FMA and for baseline x86-64 (or the host ISA elsewhere). Dispatch is
// decided once at run time, so a binary built on a login node never executes
// an instruction the compute node lacks.
#include "cpu.h"
#include <math.h>
#include <string.h>

// Accumulators live in a local tile of TW floats (two AVX registers) so the
// compiler keeps them in registers instead of storing C after every nonzero.
#define TW 16

#define PF_DIST 16
#define SPMM_BODY(N)                                                          \
  for (int64_t r = r0, nnz_end = rowptr[r1]; r < r1; r++) {                    \
    float *restrict c = C + r * (N);                                           \
    const int64_t p0 = rowptr[r], p1 = rowptr[r + 1];                          \
    int64_t t = 0;                                                             \
    for (; t + TW <= (N); t += TW) {                                           \
      /* Two accumulator sets (even and odd nonzeros) halve the FMA       */ \
      /* dependency chain; they are added in a fixed order at the end.    */ \
      float acc[TW], acc2[TW];                                                 \
      for (int j = 0; j < TW; j++) acc[j] = acc_in ? c[t + j] : 0.0f;          \
      for (int j = 0; j < TW; j++) acc2[j] = 0.0f;                             \
      int64_t p = p0;                                                          \
      for (; p + 1 < p1; p += 2) {                                             \
        /* Rows of B are gathered at random: ask for one a few nonzeros  */    \
        /* ahead so several cache misses are in flight at once.          */    \
        __builtin_prefetch(B + (int64_t)col[p + PF_DIST < nnz_end ? p + PF_DIST : p] * (N) + t); \
        __builtin_prefetch(B + (int64_t)col[p + 1 + PF_DIST < nnz_end ? p + 1 + PF_DIST : p] * (N) + t); \
        const float v = val[p], v2 = val[p + 1];                               \
        const float *restrict b = B + (int64_t)col[p] * (N) + t;               \
        const float *restrict b2 = B + (int64_t)col[p + 1] * (N) + t;          \
        for (int j = 0; j < TW; j++) acc[j] += v * b[j];                       \
        for (int j = 0; j < TW; j++) acc2[j] += v2 * b2[j];                    \
      }                                                                        \
      if (p < p1) {                                                            \
        const float v = val[p];                                                \
        const float *restrict b = B + (int64_t)col[p] * (N) + t;               \
        for (int j = 0; j < TW; j++) acc[j] += v * b[j];                       \
      }                                                                        \
      for (int j = 0; j < TW; j++) c[t + j] = acc[j] + acc2[j];                \
    }                                                                          \
    if (t < (N)) {                                                             \
      const int64_t w = (N) - t;                                               \
      float acc[TW];                                                           \
      for (int64_t j = 0; j < w; j++) acc[j] = acc_in ? c[t + j] : 0.0f;       \
      for (int64_t p = p0; p < p1; p++) {                                      \
        const float v = val[p];                                                \
        const float *restrict b = B + (int64_t)col[p] * (N) + t;               \
        for (int64_t j = 0; j < w; j++) acc[j] += v * b[j];                    \
      }                                                                        \
      for (int64_t j = 0; j < w; j++) c[t + j] = acc[j];                       \
    }                                                                          \
  }

// C rows r0..r1 of A·B. Full TW-wide column tiles take four rows at a time,
// so each B row loaded once feeds four rows of register accumulators;
// leftover rows and columns take the plain loop.
#define GEMM_NN_BODY(N)                                                       \
  {                                                                            \
    int64_t t = 0;                                                             \
    for (; t + TW <= (N); t += TW) {                                           \
      int64_t r = r0;                                                          \
      for (; r + 4 <= r1; r += 4) {                                            \
        float acc[4][TW];                                                      \
        for (int i = 0; i < 4; i++)                                            \
          for (int j = 0; j < TW; j++)                                         \
            acc[i][j] = acc_in ? C[(r + i) * (N) + t + j] : 0.0f;              \
        const float *restrict a = A + r * k;                                   \
        for (int64_t q = 0; q < k; q++) {                                      \
          const float *restrict bq = B + q * (N) + t;                          \
          const float a0 = a[q], a1 = a[k + q], a2 = a[2 * k + q], a3 = a[3 * k + q]; \
          for (int j = 0; j < TW; j++) {                                       \
            acc[0][j] += a0 * bq[j];                                           \
            acc[1][j] += a1 * bq[j];                                           \
            acc[2][j] += a2 * bq[j];                                           \
            acc[3][j] += a3 * bq[j];                                           \
          }                                                                    \
        }                                                                      \
        for (int i = 0; i < 4; i++)                                            \
          for (int j = 0; j < TW; j++) C[(r + i) * (N) + t + j] = acc[i][j];   \
      }                                                                        \
      for (; r < r1; r++) gemm_nn_plain(A, B, C, k, (N), r, t, t + TW, acc_in); \
    }                                                                          \
    if (t < (N))                                                               \
      for (int64_t r = r0; r < r1; r++) gemm_nn_plain(A, B, C, k, (N), r, t, (N), acc_in); \
  }

// C (k×N) += Aᵀ B over rows r0..r1: four rows of B stay in registers while
// each row of C is read and written once per group of four rows.
#define GEMM_TN_BODY(N)                                                       \
  {                                                                            \
    int64_t t = 0;                                                             \
    for (; t + TW <= (N); t += TW) {                                           \
      int64_t r = r0;                                                          \
      for (; r + 4 <= r1; r += 4) {                                            \
        const float *restrict b0 = B + r * (N) + t, *restrict b1 = b0 + (N);   \
        const float *restrict b2 = b1 + (N), *restrict b3 = b2 + (N);          \
        const float *restrict a = A + r * k;                                   \
        for (int64_t q = 0; q < k; q++) {                                      \
          const float a0 = a[q], a1 = a[k + q], a2 = a[2 * k + q], a3 = a[3 * k + q]; \
          float *restrict c = C + q * (N) + t;                                 \
          for (int j = 0; j < TW; j++)                                         \
            c[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];         \
        }                                                                      \
      }                                                                        \
      for (; r < r1; r++) gemm_tn_plain(A, B, C, k, (N), r, t, t + TW);        \
    }                                                                          \
    if (t < (N))                                                               \
      for (int64_t r = r0; r < r1; r++) gemm_tn_plain(A, B, C, k, (N), r, t, (N)); \
  }

// Remainder loops (leftover rows and columns): plain code, not hot.
#define DEFINE_PLAIN()                                                        \
  __attribute__((noinline)) static void gemm_nn_plain(const float *A, const float *B, float *C, \
      int64_t k, int64_t n, int64_t r, int64_t t0, int64_t t1, int acc_in) {   \
    float *c = C + r * n;                                                      \
    for (int64_t j = t0; j < t1; j++) {                                        \
      float s = acc_in ? c[j] : 0.0f;                                          \
      for (int64_t q = 0; q < k; q++) s += A[r * k + q] * B[q * n + j];        \
      c[j] = s;                                                                \
    }                                                                          \
  }                                                                            \
  __attribute__((noinline)) static void gemm_tn_plain(const float *A, const float *B, float *C, \
      int64_t k, int64_t n, int64_t r, int64_t t0, int64_t t1) {               \
    for (int64_t q = 0; q < k; q++) {                                          \
      const float av = A[r * k + q];                                           \
      for (int64_t j = t0; j < t1; j++) C[q * n + j] += av * B[r * n + j];     \
    }                                                                          \
  }

// Widths used by GCNs (hidden and class counts) get a compile-time trip count
// so the inner loop becomes straight-line vector code.
#define DISPATCH_WIDTH(BODY)                                                  \
  switch (n) {                                                                 \
  case 16: BODY(16); break;                                                    \
  case 32: BODY(32); break;                                                    \
  case 64: BODY(64); break;                                                    \
  case 128: BODY(128); break;                                                  \
  default: BODY(n); break;                                                     \
  }

#define DEFINE_KERNELS(SUFFIX, ATTR)                                          \
  ATTR static void spmm_##SUFFIX(const int64_t *rowptr, const int32_t *col,    \
                                 const float *val, const float *B, float *C,   \
                                 int64_t n, int64_t r0, int64_t r1, int acc_in) { \
    DISPATCH_WIDTH(SPMM_BODY)                                                  \
  }                                                                            \
  ATTR static void gemm_nn_##SUFFIX(const float *A, const float *B, float *C,  \
                                    int64_t k, int64_t n, int64_t r0,          \
                                    int64_t r1, int acc_in) {                  \
    DISPATCH_WIDTH(GEMM_NN_BODY)                                               \
  }                                                                            \
  ATTR static void gemm_tn_##SUFFIX(const float *A, const float *B, float *C,  \
                                    int64_t k, int64_t n, int64_t r0,          \
                                    int64_t r1) {                              \
    DISPATCH_WIDTH(GEMM_TN_BODY)                                               \
  }                                                                            \
  ATTR static void bias_relu_##SUFFIX(float *restrict z, const float *restrict bias, \
                                      int64_t n, int64_t r0, int64_t r1, int relu) { \
    for (int64_t r = r0; r < r1; r++) {                                        \
      float *restrict row = z + r * n;                                         \
      if (relu)                                                                \
        for (int64_t c = 0; c < n; c++) { const float v = row[c] + bias[c]; row[c] = v > 0.0f ? v : 0.0f; }  \
      else                                                                     \
        for (int64_t c = 0; c < n; c++) row[c] += bias[c];                     \
    }                                                                          \
  }                                                                            \
  /* g = 0 where h <= 0, without branches (ReLU zeroes about half). */         \
  ATTR static void relu_backward_##SUFFIX(float *restrict g, const float *restrict h, \
                                          int64_t i0, int64_t i1) {            \
    for (int64_t i = i0; i < i1; i++) g[i] = h[i] > 0.0f ? g[i] : 0.0f;        \
  }                                                                            \
  ATTR static void triad_##SUFFIX(float *a, const float *b, const float *c,    \
                                  float s, int64_t i0, int64_t i1) {           \
    for (int64_t i = i0; i < i1; i++) a[i] = b[i] + s * c[i];                  \
  }

DEFINE_PLAIN()
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
void sc_bias_relu(float *z, const float *bias, int64_t n, int64_t r0, int64_t r1, int relu) {
  PICK(bias_relu, z, bias, n, r0, r1, relu);
}
void sc_relu_backward(float *g, const float *h, int64_t i0, int64_t i1) {
  PICK(relu_backward, g, h, i0, i1);
}
void sc_triad(float *a, const float *b, const float *c, float s, int64_t i0, int64_t i1) {
  PICK(triad, a, b, c, s, i0, i1);
}

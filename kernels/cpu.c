// SpMM and the elementwise kernels. Each is written once as an inline body
// and compiled per instruction set (simd.h picks at run time); GEMM and
// dense dropout are in gemm.c.
#include "activation.h"
#include "cpu.h"
#include "simd.h"
#include "vexp.h"
#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// A tile is 16 columns in the level's native vectors (four xmm, two ymm
// or one zmm); aligned(4) makes the loads unaligned.
#define VW 16
#define PF_DIST 16

// spmm_tile: c[t .. t+NV·16) of one row = (or +=) Σ_p val[p]·B[col[p]], in
// the order of the row's nonzeros (one FMA chain per vector), with rows of B
// prefetched PF_DIST nonzeros ahead for each vector of the tile: they are
// gathered at random, so several cache misses must be outstanding at once,
// and a wider tile spends longer on a nonzero, so its requests must leave
// earlier (results/README.md, stop 67). More chains were slower. The
// prefetches fill L2, not L1 (prefetcht1): into L1 they held its few miss
// buffers. Only in the rows within that distance of pf_end is a
// prefetch's index clamped to the nonzeros that exist: a clamp at every
// nonzero costs at narrow widths. W(p) is the weight of nonzero p, written before its row: SC_VAL,
// val[p]·, for the product, or SC_ONE, nothing, for the gathers alone
// (gather_: the kernel benchmark's).
#define SC_VAL(p) val[p] *
#define SC_ONE(p)
#define SPMM_TILE(NAME, W, NV, SUFFIX, ATTR)                                   \
  ATTR static inline void NAME##_tile##NV##_##SUFFIX(const int32_t *restrict col, \
      const float *restrict val, int64_t p0, int64_t p1, int64_t pf_end, const float *restrict B, \
      int64_t n, int64_t t, float *restrict c, int acc_in) {                   \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float), NW = NV * VW / L };                 \
    vf s[NW];                                                                  \
    for (int v = 0; v < NW; v++) s[v] = acc_in ? *(const vf *)(c + t + v * L) : (vf){0}; \
    enum { PFD = PF_DIST * NV };                                               \
    const int clamp = p1 + PFD > pf_end;                                       \
    for (int64_t p = p0; p < p1; p++) {                                        \
      const int64_t q = !clamp || p + PFD < pf_end ? p + PFD : p;              \
      for (int v = 0; v < NV; v++) __builtin_prefetch(B + (int64_t)col[q] * n + t + v * VW, 0, 2); \
      const float *b = B + (int64_t)col[p] * n + t;                            \
      for (int v = 0; v < NW; v++) s[v] += W(p) * (const vf *)(b + v * L);     \
    }                                                                          \
    for (int v = 0; v < NW; v++) *(vf *)(c + t + v * L) = s[v];                \
  }

// spmm_pair: rows c and d of C = (or +=) their nonzeros' sums over a B one
// vector wide and small enough for L1 (X·W, features by a weight): no
// prefetches, and two rows' chains in step, since one chain of FMAs waits
// on each before it. Each row keeps its own order, so it sums as the tile.
#define SPMM_PAIR(NAME, W, SUFFIX, ATTR)                                       \
  ATTR static inline void NAME##_pair_##SUFFIX(const int32_t *restrict col,   \
      const float *restrict val, int64_t p, int64_t pe, int64_t q, int64_t qe, \
      const float *restrict B, float *restrict c, float *restrict d, int acc_in) { \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float), NW = VW / L };                      \
    vf s[NW], t[NW];                                                           \
    for (int v = 0; v < NW; v++) {                                             \
      s[v] = acc_in ? *(const vf *)(c + v * L) : (vf){0};                      \
      t[v] = acc_in ? *(const vf *)(d + v * L) : (vf){0};                      \
    }                                                                          \
    for (; p < pe && q < qe; p++, q++) {                                       \
      const float *b = B + (int64_t)col[p] * VW, *e = B + (int64_t)col[q] * VW; \
      for (int v = 0; v < NW; v++) {                                           \
        s[v] += W(p) *(const vf *)(b + v * L);                                 \
        t[v] += W(q) *(const vf *)(e + v * L);                                 \
      }                                                                        \
    }                                                                          \
    for (; p < pe; p++)                                                        \
      for (int v = 0; v < NW; v++) s[v] += W(p) *(const vf *)(B + (int64_t)col[p] * VW + v * L); \
    for (; q < qe; q++)                                                        \
      for (int v = 0; v < NW; v++) t[v] += W(q) *(const vf *)(B + (int64_t)col[q] * VW + v * L); \
    for (int v = 0; v < NW; v++) {                                             \
      *(vf *)(c + v * L) = s[v];                                               \
      *(vf *)(d + v * L) = t[v];                                               \
    }                                                                          \
  }

// NARROW_B is the largest B (bytes) that spmm treats as resident in L1.
#define NARROW_B (32 << 10)

// spmm: rows [r0, r1) of C = (or +=) A·B, or rows list[r0..r1), B n wide:
// tiles of up to NVMAX vectors per pass over a row's nonzeros, leftover
// columns (n % 16) plain. NAME and W as for SPMM_TILE.
#define SPMM(NAME, W, NVMAX, SUFFIX, ATTR)                                     \
  SPMM_TILE(NAME, W, 1, SUFFIX, ATTR)                                          \
  SPMM_TILE(NAME, W, 2, SUFFIX, ATTR)                                          \
  SPMM_TILE(NAME, W, 4, SUFFIX, ATTR)                                          \
  SPMM_PAIR(NAME, W, SUFFIX, ATTR)                                             \
  ATTR static void NAME##_##SUFFIX(const int64_t *rowptr, const int32_t *col, const float *val, \
                                 const float *B, int64_t kb, float *C, int64_t n, int64_t r0, \
                                 int64_t r1, int acc_in, const int32_t *list) { \
    if (r1 <= r0) return;                                                      \
    if (n == VW && kb * VW * (int64_t)sizeof(float) <= NARROW_B) {             \
      int64_t i = r0;                                                          \
      for (; i + 1 < r1; i += 2) {                                             \
        const int64_t r = list ? list[i] : i, q = list ? list[i + 1] : i + 1;  \
        NAME##_pair_##SUFFIX(col, val, rowptr[r], rowptr[r + 1], rowptr[q], rowptr[q + 1], B, \
                             C + r * VW, C + q * VW, acc_in);                  \
      }                                                                        \
      if (i < r1) {                                                            \
        const int64_t r = list ? list[i] : i;                                  \
        NAME##_tile1_##SUFFIX(col, val, rowptr[r], rowptr[r + 1], rowptr[r + 1], B, VW, 0, C + r * VW, acc_in); \
      }                                                                        \
      return;                                                                  \
    }                                                                          \
    /* Prefetches run ahead over the nonzeros up to the last row's end: */     \
    /* with an ascending list past empty rows, the next listed rows'. */       \
    const int64_t pf_end = rowptr[(list ? list[r1 - 1] : r1 - 1) + 1];        \
    /* One row of B per vector tile (the hidden width 16): the row stride */   \
    /* a constant, so no multiply per gathered row.                       */   \
    if (n == VW) {                                                             \
      for (int64_t i = r0; i < r1; i++) {                                      \
        const int64_t r = list ? list[i] : i;                                  \
        NAME##_tile1_##SUFFIX(col, val, rowptr[r], rowptr[r + 1], pf_end, B, VW, 0, C + r * VW, acc_in); \
      }                                                                        \
      return;                                                                  \
    }                                                                          \
    const int64_t nv = n / VW * VW;                                            \
    for (int64_t i = r0; i < r1; i++) {                                        \
      const int64_t r = list ? list[i] : i;                                    \
      float *c = C + r * n;                                                    \
      const int64_t p0 = rowptr[r], p1 = rowptr[r + 1];                        \
      int64_t t = 0;                                                           \
      if (NVMAX >= 4)                                                          \
        for (; t + 4 * VW <= nv; t += 4 * VW) NAME##_tile4_##SUFFIX(col, val, p0, p1, pf_end, B, n, t, c, acc_in); \
      if (NVMAX >= 2)                                                          \
        for (; t + 2 * VW <= nv; t += 2 * VW) NAME##_tile2_##SUFFIX(col, val, p0, p1, pf_end, B, n, t, c, acc_in); \
      for (; t < nv; t += VW) NAME##_tile1_##SUFFIX(col, val, p0, p1, pf_end, B, n, t, c, acc_in); \
      for (; t < n; t++) {                                                     \
        float s = acc_in ? c[t] : 0.0f;                                        \
        for (int64_t p = p0; p < p1; p++) s += W(p) B[(int64_t)col[p] * n + t]; \
        c[t] = s;                                                              \
      }                                                                        \
    }                                                                          \
  }

// spmm_t: C (m×n) = Σ over rows [r0, r1) of A: each nonzero (i, j, v) adds
// v·B's row i into C's row j, in row order. C is a chunk's partial, small
// enough for L1; B's row stays in registers where it is 1, 2 or 4 vectors
// (SPMM_T_HELD, NV of them).
#define SPMM_T_HELD(NV)                                                        \
  for (int64_t i = r0; i < r1; i++) {                                          \
    vf b[NV];                                                                  \
    for (int u = 0; u < NV; u++) b[u] = *(const vf *)(B + i * n + u * L);      \
    for (int64_t p = rowptr[i]; p < rowptr[i + 1]; p++) {                      \
      float *c = C + (int64_t)col[p] * n;                                      \
      for (int u = 0; u < NV; u++) *(vf *)(c + u * L) += val[p] * b[u];        \
    }                                                                          \
  }
#define SPMM_T(SUFFIX, ATTR)                                                   \
  ATTR static void spmm_t_##SUFFIX(const int64_t *rowptr, const int32_t *col, \
                                   const float *val, const float *restrict B, \
                                   float *restrict C, int64_t m, int64_t n,   \
                                   int64_t r0, int64_t r1) {                   \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    memset(C, 0, (size_t)(m * n) * sizeof(float));                             \
    if (n % L == 0) switch (n / L) {                                           \
      case 1: SPMM_T_HELD(1); return;                                          \
      case 2: SPMM_T_HELD(2); return;                                          \
      case 4: SPMM_T_HELD(4); return;                                          \
      }                                                                        \
    const int64_t nv = n / L * L;                                              \
    for (int64_t i = r0; i < r1; i++) {                                        \
      const float *b = B + i * n;                                              \
      for (int64_t p = rowptr[i]; p < rowptr[i + 1]; p++) {                    \
        float *c = C + (int64_t)col[p] * n;                                    \
        const float v = val[p];                                                \
        int64_t j = 0;                                                         \
        for (; j < nv; j += L) *(vf *)(c + j) += v * *(const vf *)(b + j);     \
        for (; j < n; j++) c[j] += v * b[j];                                   \
      }                                                                        \
    }                                                                          \
  }

#define DEFINE_KERNELS(SUFFIX, ATTR)                                          \
  /* Rows [r0, r1), or rows list[r0..r1) with a list. */                     \
  ATTR static void bias_relu_##SUFFIX(float *restrict z, const float *restrict bias, \
                                      int64_t n, int64_t r0, int64_t r1, int relu, \
                                      const int32_t *list) {                   \
    for (int64_t i = r0; i < r1; i++) {                                        \
      float *restrict row = z + (list ? list[i] : i) * n;                      \
      if (relu)                                                                \
        SC_BIAS_RELU(row, row, bias, n)                                        \
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
  }                                                                            \
  ATTR static void add_##SUFFIX(float *restrict a, const float *restrict b,  \
                               int64_t i0, int64_t i1) {                       \
    for (int64_t i = i0; i < i1; i++) a[i] += b[i];                            \
  }                                                                            \
  ATTR static void scale_rows_##SUFFIX(float *dst, const float *src,         \
                                       const float *s, int64_t n, int64_t r0, \
                                       int64_t r1) {                           \
    for (int64_t r = r0; r < r1; r++)                                          \
      for (int64_t k = 0; k < n; k++) dst[r * n + k] = src[r * n + k] * s[r];  \
  }                                                                            \
  /* Four independent sums, so the adds keep up with the loads. */             \
  ATTR static void sum_##SUFFIX(const float *a, int64_t i0, int64_t i1, int64_t reps, \
                                double *out) {                                 \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    double t = 0;                                                              \
    for (int64_t r = 0; r < reps; r++) {                                       \
      vf s[4] = {{0}};                                                         \
      int64_t i = i0;                                                          \
      for (; i + 4 * L <= i1; i += 4 * L)                                      \
        for (int u = 0; u < 4; u++) s[u] += *(const vf *)(a + i + u * L);     \
      for (int u = 0; u < 4; u++)                                              \
        for (int l = 0; l < L; l++) t += s[u][l];                              \
      for (; i < i1; i++) t += a[i];                                           \
    }                                                                          \
    *out = t;                                                                  \
  }

DEFINE_KERNELS(base, )
SPMM(spmm, SC_VAL, 1, base, )
SPMM_T(base, )
SPMM(gather, SC_ONE, 1, base, )

#if defined(__x86_64__) && defined(__GNUC__)
DEFINE_KERNELS(avx2, SC_AVX2)
SPMM(spmm, SC_VAL, 2, avx2, SC_AVX2)
SPMM_T(avx2, SC_AVX2)
SPMM(gather, SC_ONE, 2, avx2, SC_AVX2)
SPMM(spmm, SC_VAL, 4, avx512, SC_AVX512)
SPMM_T(avx512, SC_AVX512)
SPMM(gather, SC_ONE, 4, avx512, SC_AVX512)
static int level = -1;
int sc_simd_level(void) {
  if (level < 0) {
    __builtin_cpu_init();
    level = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = 1;
    if (level && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
      level = 2;
  }
  return level;
}
void sc_limit_simd(int l) {
  if (l < sc_simd_level()) level = l < 0 ? 0 : l;
}
#else
int sc_simd_level(void) { return 0; }
void sc_limit_simd(int l) { (void)l; }
#endif

void sc_spmm(const int64_t *rowptr, const int32_t *col, const float *val,
             const float *B, int64_t kb, float *C, int64_t n, int64_t r0, int64_t r1, int acc,
             const int32_t *rows) {
  FLUSH_DENORMALS(PICK3(spmm, rowptr, col, val, B, kb, C, n, r0, r1, acc, rows));
}
void sc_bias_relu(float *z, const float *bias, int64_t n, int64_t r0, int64_t r1, int relu,
                  const int32_t *rows) {
  PICK(bias_relu, z, bias, n, r0, r1, relu, rows);
}
void sc_scale_rows(float *dst, const float *src, const float *s, int64_t n, int64_t r0,
                   int64_t r1) {
  PICK(scale_rows, dst, src, s, n, r0, r1);
}
void sc_spmm_t(const int64_t *rowptr, const int32_t *col, const float *val, const float *B,
               float *C, int64_t m, int64_t n, int64_t r0, int64_t r1) {
  FLUSH_DENORMALS(PICK3(spmm_t, rowptr, col, val, B, C, m, n, r0, r1));
}
void sc_relu_backward(float *g, const float *h, int64_t i0, int64_t i1) {
  PICK(relu_backward, g, h, i0, i1);
}
// Rows of w bytes moved between a block and a packed buffer (the sparse
// exchange's send and receive), in C rather than a Go copy per row (a call
// to memmove each); what they cost is mostly the misses on rows spread
// through a block far larger than the caches.
// The row ROW_PF entries ahead is prefetched, every line of it (a GNN's
// 16-float row is one line); an ascending list gains little from it, a
// shuffled one about a fifth.
#define ROW_PF 8
static inline void prefetch_row(const char *p, int64_t w, int write) {
  for (int64_t b = 0; b < w; b += 64) {
    if (write)
      __builtin_prefetch(p + b, 1);
    else
      __builtin_prefetch(p + b, 0);
  }
}
static inline void move_row(char *restrict dst, const char *restrict src, int64_t w) {
  if (w == 64)
    memcpy(dst, src, 64);
  else
    memcpy(dst, src, (size_t)w);
}
void sc_gather_rows(char *restrict dst, const char *restrict src, const int32_t *rows,
                    int64_t cnt, int64_t w) {
  for (int64_t k = 0; k < cnt; k++) {
    if (k + ROW_PF < cnt) prefetch_row(src + (int64_t)rows[k + ROW_PF] * w, w, 0);
    move_row(dst + k * w, src + (int64_t)rows[k] * w, w);
  }
}
// sc_gather_rows_stream is sc_gather_rows for a large pack that leaves this
// core (it is sent, not read here again): stores that bypass the caches,
// so no destination line is read before it is written and nothing of use
// is evicted, and no software prefetch, which on the exchange's ascending
// lists only competes with the hardware's. Rows are whole 16-byte units
// and dst is 16-byte aligned (the caller checks).
void sc_gather_rows_stream(char *restrict dst, const char *restrict src, const int32_t *rows,
                           int64_t cnt, int64_t w) {
#if defined(__SSE2__)
  for (int64_t k = 0; k < cnt; k++) {
    const __m128i *s = (const __m128i *)(src + (int64_t)rows[k] * w);
    __m128i *d = (__m128i *)(dst + k * w);
    if (w == 64) { // a GNN's 16-float row: the four loads issue together
      const __m128i a0 = _mm_loadu_si128(s), a1 = _mm_loadu_si128(s + 1),
                    a2 = _mm_loadu_si128(s + 2), a3 = _mm_loadu_si128(s + 3);
      _mm_stream_si128(d, a0), _mm_stream_si128(d + 1, a1);
      _mm_stream_si128(d + 2, a2), _mm_stream_si128(d + 3, a3);
      continue;
    }
    for (int64_t b = 0; b < w / 16; b++) _mm_stream_si128(d + b, _mm_loadu_si128(s + b));
  }
  _mm_sfence(); // the streamed lines are visible before the send reads them
#else
  sc_gather_rows(dst, src, rows, cnt, w);
#endif
}
void sc_scatter_rows(char *restrict dst, const char *restrict src, const int32_t *rows,
                     int64_t cnt, int64_t w) {
  for (int64_t k = 0; k < cnt; k++) {
    if (k + ROW_PF < cnt) prefetch_row(dst + (int64_t)rows[k + ROW_PF] * w, w, 1);
    move_row(dst + (int64_t)rows[k] * w, src + k * w, w);
  }
}

// sc_add_rows adds src's k-th row to dst's row rows[k] (rows w floats,
// distinct): the sums a peer sends for this rank's rows (the sparse
// exchange's transpose).
void sc_add_rows(float *restrict dst, const float *restrict src, const int32_t *rows, int64_t cnt,
                 int64_t w) {
  for (int64_t k = 0; k < cnt; k++) {
    if (k + ROW_PF < cnt) prefetch_row((char *)(dst + (int64_t)rows[k + ROW_PF] * w), 4 * w, 1);
    float *d = dst + (int64_t)rows[k] * w;
    const float *x = src + k * w;
    for (int64_t t = 0; t < w; t++) d[t] += x[t];
  }
}

// sc_first_bad_row is the index of the first entry of rows outside
// [0, n), or -1: a branch-free pass first (it vectorizes), then a search
// only when something is wrong.
int64_t sc_first_bad_row(const int32_t *rows, int64_t cnt, int64_t n) {
  uint32_t bad = 0;
  const uint32_t lim = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
  for (int64_t i = 0; i < cnt; i++) bad |= (uint32_t)rows[i] >= lim;
  if (!bad) return -1;
  for (int64_t i = 0; i < cnt; i++)
    if ((uint32_t)rows[i] >= lim) return i;
  return -1;
}
void sc_triad(float *a, const float *b, const float *c, float s, int64_t i0, int64_t i1) {
  PICK(triad, a, b, c, s, i0, i1);
}
void sc_add(float *a, const float *b, int64_t i0, int64_t i1) { PICK(add, a, b, i0, i1); }
void sc_gather_sum(const int64_t *rowptr, const int32_t *col, const float *B, float *C, int64_t n,
                   int64_t r0, int64_t r1) {
  FLUSH_DENORMALS(PICK3(gather, rowptr, col, NULL, B, 0, C, n, r0, r1, 0, NULL));
}
double sc_sum(const float *a, int64_t i0, int64_t i1, int64_t reps) {
  double s;
  PICK(sum, a, i0, i1, reps, &s);
  return s;
}

// renormalize scales a positive normal *x into [1, 2) by a power of two
// and returns its exponent; a NaN, infinity, zero or subnormal stays as it
// is (0).
static inline int64_t renormalize(double *x) {
  uint64_t b;
  memcpy(&b, x, sizeof b);
  const int64_t ex = (int64_t)(b >> 52 & 0x7ff);
  if (ex == 0 || ex == 0x7ff) return 0;
  b = (b & ~(0x7ffULL << 52)) | (1023ULL << 52);
  memcpy(x, &b, sizeof b);
  return ex - 1023;
}

// Softmax cross-entropy of the listed rows [i0, i1) of rows: returns their
// summed loss and writes their gradient rows (softmax − onehot)/norm into
// grad (nil: loss only; it may be z itself). A row is padded with −∞ to
// whole vectors, its exponentials taken on vectors (vexp.h, within 2 ulp
// of e^x) and summed in double in column order, as in the CUDA kernel; the
// sums' logs are taken as one log of their product (the CUDA kernel takes
// one a row: the losses agree to parts in 1e16, the gradients bit for
// bit). The rows go G at a time, their sums interleaved, so that the G
// chains of dependent adds overlap; the gradient is formed on vectors of
// doubles, the same arithmetic per value. Training rows are scattered, so
// each row is a cache miss: rows and their labels are prefetched ahead.
#define SOFTMAX_CE(SUFFIX, ATTR)                                               \
  VEXP(SUFFIX, ATTR)                                                           \
  ATTR static void softmax_ce_##SUFFIX(const float *z, int64_t c, const int32_t *labels, \
                                       const int32_t *rows, int64_t i0, int64_t i1, \
                                       double norm, float *grad, double *out) { \
    typedef vf_##SUFFIX vf;                                                    \
    typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));   \
    typedef double vd __attribute__((vector_size(sizeof(vf))));                \
    typedef float vh __attribute__((vector_size(sizeof(vf) / 2), aligned(4))); \
    typedef int64_t vl __attribute__((vector_size(sizeof(vf))));               \
    enum { L = sizeof(vf) / sizeof(float), D = L / 2, G = 4 };                 \
    /* the one-hot row a vector at a time: lanes j with k + j = y are 1.0 */  \
    /* (its bits, 0x3ff0…), by a compare, where a lane-by-lane build       */  \
    /* branched eight times a vector                                        */  \
    vl iota, one;                                                              \
    for (int j = 0; j < D; j++) iota[j] = j, one[j] = 0x3ff0000000000000LL;    \
    const int64_t nv = (c + L - 1) / L;                                        \
    vf e[G][nv > 0 ? nv : 1];                                                  \
    const double inv_norm = 1 / norm;                                          \
    /* Σ log s over the rows as the log of their product, its power of two */ \
    /* kept apart (renormalize, a group) so that it cannot overflow: one    */ \
    /* log a call, where one a row was a fifth of the kernel.                */ \
    double loss = 0, prod = 1;                                                 \
    int64_t pow2 = 0;                                                          \
    for (int64_t i = i0; i < i1; i += G) {                                     \
      const int n = i1 - i < G ? (int)(i1 - i) : G;                            \
      double s[G] = {0}, zy[G];                                                \
      float mx[G];                                                             \
      for (int q = 0; q < n; q++) {                                            \
        const int64_t r = rows[i + q];                                         \
        const float *row = z + r * c;                                          \
        float *t = (float *)e[q];                                              \
        if (i + q + 2 * G < i1) {                                              \
          const int64_t ahead = rows[i + q + 2 * G];                           \
          __builtin_prefetch(z + ahead * c);                                   \
          __builtin_prefetch(labels + ahead);                                  \
          if (grad) __builtin_prefetch(grad + ahead * c, 1);                   \
        }                                                                      \
        for (int64_t k = 0; k < nv * L; k++) t[k] = k < c ? row[k] : -INFINITY; \
        /* the largest value, NaN passed over as the scalar select does */    \
        vf m = e[q][0];                                                        \
        for (int64_t v = 1; v < nv; v++) {                                     \
          const vi up = e[q][v] > m;                                           \
          m = (vf)(((vi)e[q][v] & up) | ((vi)m & ~up));                        \
        }                                                                      \
        float x = -INFINITY;                                                   \
        for (int j = 0; j < L; j++) x = m[j] > x ? m[j] : x;                   \
        mx[q] = x;                                                             \
        zy[q] = row[labels[r]];                                                \
        for (int64_t v = 0; v < nv; v++) e[q][v] = vexp_##SUFFIX(e[q][v] - x); \
      }                                                                        \
      for (int64_t k = 0; k < c; k++) /* each row's sum in column order */     \
        for (int q = 0; q < G; q++)                                            \
          if (q < n) s[q] += ((const float *)e[q])[k];                         \
      for (int q = 0; q < n; q++) {                                            \
        const int64_t r = rows[i + q];                                         \
        loss += -(zy[q] - mx[q]);                                              \
        prod *= s[q];                                                          \
        if (!grad) continue;                                                   \
        float *g = grad + r * c;                                               \
        const float *t = (const float *)e[q];                                  \
        const int32_t y = labels[r];                                           \
        const double inv_s = 1 / s[q];                                         \
        int64_t k = 0;                                                         \
        for (; k + D <= c; k += D) {                                           \
          vh tk;                                                               \
          memcpy(&tk, t + k, sizeof tk);                                       \
          const vd hot = (vd)((iota == (vl){0} + (int64_t)(y - k)) & one);     \
          const vh gk = __builtin_convertvector((__builtin_convertvector(tk, vd) * inv_s - hot) * inv_norm, vh); \
          memcpy(g + k, &gk, sizeof gk);                                       \
        }                                                                      \
        for (; k < c; k++) g[k] = (float)((t[k] * inv_s - (k == y)) * inv_norm); \
      }                                                                        \
      pow2 += renormalize(&prod);                                              \
    }                                                                          \
    *out = loss + (log(prod) + (double)pow2 * M_LN2);                          \
  }                                                                            \
  ATTR static void exp_n_##SUFFIX(const float *x, float *y, int64_t n) {       \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    for (int64_t i = 0; i < n; i += L) {                                       \
      vf v;                                                                    \
      for (int j = 0; j < L; j++) v[j] = i + j < n ? x[i + j] : 0.0f;          \
      v = vexp_##SUFFIX(v);                                                    \
      for (int j = 0; j < L && i + j < n; j++) y[i + j] = v[j];                \
    }                                                                          \
  }                                                                            \
  ATTR static void elu_##SUFFIX(float *h, int64_t i0, int64_t i1) {            \
    typedef vf_##SUFFIX vf;                                                    \
    typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));   \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    for (; i0 + L <= i1; i0 += L) { /* whole vectors: selected by a mask */    \
      const vf x = *(const vf *)(h + i0);                                      \
      const vi neg = x < 0;                                                    \
      const vf e = vexp_##SUFFIX((vf)((vi)x & neg)) - 1.0f;                    \
      *(vf *)(h + i0) = (vf)(((vi)e & neg) | ((vi)x & ~neg));                  \
    }                                                                          \
    for (int64_t i = i0; i < i1; i += L) {                                     \
      const int m = i1 - i < L ? (int)(i1 - i) : L;                            \
      vf v;                                                                    \
      for (int j = 0; j < L; j++) v[j] = j < m && h[i + j] < 0 ? h[i + j] : 0.0f; \
      v = vexp_##SUFFIX(v);                                                    \
      for (int j = 0; j < m; j++)                                              \
        if (h[i + j] < 0) h[i + j] = v[j] - 1.0f;                              \
    }                                                                          \
  }                                                                            \
  ATTR static void elu_backward_##SUFFIX(float *restrict g, const float *restrict h, int64_t i0, \
                                         int64_t i1) {                         \
    typedef vf_##SUFFIX vf;                                                    \
    typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));   \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    const vf one = (vf){0} + 1.0f;                                             \
    for (; i0 + L <= i1; i0 += L) {                                            \
      const vf x = *(const vf *)(h + i0);                                      \
      const vi le = x <= 0;                                                    \
      *(vf *)(g + i0) *= (vf)(((vi)(x + 1.0f) & le) | ((vi)one & ~le));        \
    }                                                                          \
    for (int64_t i = i0; i < i1; i++) g[i] *= h[i] <= 0 ? h[i] + 1 : 1.0f;     \
  }

SOFTMAX_CE(base, )
#if defined(__x86_64__) && defined(__GNUC__)
SOFTMAX_CE(avx2, SC_AVX2)
SOFTMAX_CE(avx512, SC_AVX512)
#endif

// sc_exp sets y = e^x for n values x ≤ 0 through vexp (the loss's
// exponential, tested against float64 on its own).
void sc_exp(const float *x, float *y, int64_t n) { PICK3(exp_n, x, y, n); }

// ELU in place on h[i0, i1): e^x − 1 where x < 0 (x ≤ 0 is all vexp
// takes), through the loss's exponential.
void sc_elu(float *h, int64_t i0, int64_t i1) { PICK3(elu, h, i0, i1); }

// ELU's backward on g[i0, i1), read off its output h: g·(h + 1) where
// h ≤ 0, g where h > 0.
void sc_elu_backward(float *g, const float *h, int64_t i0, int64_t i1) {
  PICK3(elu_backward, g, h, i0, i1);
}

double sc_softmax_ce(const float *z, int64_t c, const int32_t *labels, const int32_t *rows,
                     int64_t i0, int64_t i1, double norm, float *grad) {
  double loss;
  PICK3(softmax_ce, z, c, labels, rows, i0, i1, norm, grad, &loss);
  return loss;
}

// Column sums of rows [r0, r1) of g (n wide), or of rows[r0..r1), into out.
void sc_column_sums(const float *g, int64_t n, int64_t r0, int64_t r1, const int32_t *rows,
                    float *out) {
  for (int64_t j = 0; j < n; j++) out[j] = 0;
  for (int64_t i = r0; i < r1; i++) {
    const float *row = g + (rows ? rows[i] : i) * n;
    for (int64_t j = 0; j < n; j++) out[j] += row[j];
  }
}

// SpMM and the elementwise kernels. Each is written once in a body file
// (*_body.h) and compiled per instruction set (simd.h picks at run time);
// GEMM and dense dropout are in gemm.c.
#include "activation.h"
#include "cpu.h"
#include "simd.h"
#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// A tile is 16 columns in the level's native vectors (four xmm, two ymm
// or one zmm); aligned(4) makes the loads unaligned.
#define VW 16
#define PF_DIST 16
// NARROW_B is the largest B (bytes) that spmm treats as resident in L1.
#define NARROW_B (32 << 10)

// spmm_arow is the row of A (rowptr's index) at position i of an SpMM
// forming row r of C: i where rowptr is indexed by list position (a
// block's occupied rows with their pointers alone), else r.
static inline int64_t spmm_arow(int64_t i, int64_t r, int compact) { return compact ? i : r; }

// Once per level: the elementwise kernels (elementwise_body.h; none at
// AVX-512), the SpMM (spmm_body.h) and its transpose (spmm_t_body.h), and
// gather, the SpMM's gathers without the products (the kernel
// benchmark's). SC_NVMAX is the widest tile, in vectors of VW floats.
#define SC_SUFFIX base
#define SC_TARGET
#define SC_NVMAX 1
#include "elementwise_body.h"
#include "spmm_level.h"
#undef SC_NVMAX
#undef SC_SUFFIX
#undef SC_TARGET

#if defined(__x86_64__) && defined(__GNUC__)
#define SC_SUFFIX avx2
#define SC_TARGET SC_AVX2
#define SC_NVMAX 2
#include "elementwise_body.h"
#include "spmm_level.h"
#undef SC_NVMAX
#undef SC_SUFFIX
#undef SC_TARGET
#define SC_SUFFIX avx512
#define SC_TARGET SC_AVX512
#define SC_NVMAX 4
#include "spmm_level.h"
#undef SC_NVMAX
#undef SC_SUFFIX
#undef SC_TARGET
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
  FLUSH_DENORMALS(PICK3(spmm, rowptr, col, val, B, kb, C, n, r0, r1, acc, rows, 0));
}
void sc_spmm_compact(const int64_t *ptr, const int32_t *col, const float *val, const float *B,
                     int64_t kb, float *C, int64_t n, int64_t r0, int64_t r1, int acc,
                     const int32_t *rows) {
  FLUSH_DENORMALS(PICK3(spmm, ptr, col, val, B, kb, C, n, r0, r1, acc, rows, 1));
}
void sc_spmm_cols(const int64_t *ptr, const int32_t *col, const float *val, const float *B,
                  int64_t lo, int64_t hi, float *C, int64_t n, int64_t r0, int64_t r1, int acc,
                  const int32_t *rows, int compact, int64_t *cur, int first) {
  FLUSH_DENORMALS(PICK3(spmm_cols, ptr, col, val, B, lo, hi, C, n, r0, r1, acc, rows, compact, cur, first));
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
// 16-float row is one line): a shuffled list's rows are misses the
// hardware prefetcher does not see coming.
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
  FLUSH_DENORMALS(PICK3(gather, rowptr, col, NULL, B, 0, C, n, r0, r1, 0, NULL, 0));
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

// The loss, e^x and ELU on vexp, once per level (vexp_body.h,
// softmax_body.h).
#define SC_BODY "vexp_body.h"
#define SC_BODY2 "softmax_body.h"
#include "levels.h"

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

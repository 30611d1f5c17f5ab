// GAT attention over one column block (src/train/gat.go has the math and
// the layout of the rows that travel). Each function works on a row range
// and writes only those rows, so the Go side splits rows over threads.
//
// A row's edges are taken a chunk at a time: the chunk's scores for every
// head are gathered into a small buffer, their exponentials taken on
// vectors (vexp.h), and only then are the rows of U or G read. The forward
// rescales a head's running sum and output once per chunk, by the chunk's
// maximum, not at every larger score. Nothing the size of the edge list is
// stored: the backward recomputes each coefficient from the row's maximum
// and sum, which costs less than reading it back.
//
// Attention dropout is keyed by the edge's original node ids: head k of
// edge (target, source) keeps its coefficient by 16 bits of
// sc_mix64(edge ^ k/4), edge = wire.Seed(key ^ target, source).
#include <math.h>
#include "cpu.h"
#include "dropout_rng.h"
#include "simd.h"
#include "vexp.h"

#define GOLDEN 0x9e3779b97f4a7c15ULL

// CHUNK is the scores taken per pass (edges × heads): small enough for L1.
#define CHUNK 256

static inline int64_t id_of(const int64_t *ids, int64_t row0, int64_t r) { return ids ? ids[r] : row0 + r; }

// edge_key is wire.Seed(key ^ target, source).
static inline uint64_t edge_key(uint64_t key, int64_t target, int64_t source) {
  return sc_mix64((key ^ (uint64_t)target) ^ sc_mix64((uint64_t)source + GOLDEN));
}

// edge_scales writes the dropout scale of an edge's coefficient in each of
// its h heads (1/keep kept, 0 dropped): 16-bit draws, four heads to a hash
// of the edge's key. Without dropout (key 0) the scales stay 1.
typedef struct {
  uint32_t thr; // a draw below thr is dropped
  float scale;  // 1/keep
} drop_of_t;
static inline drop_of_t drop_of(float keep) {
  return (drop_of_t){(uint32_t)((1.0f - keep) * 65536.0f + 0.5f), 1.0f / keep};
}
static inline void edge_scales(uint64_t edge, int64_t h, drop_of_t dr, float *d) {
  for (int64_t k = 0; k < h; k += 4) {
    const uint64_t z = sc_mix64(edge ^ (uint64_t)(k >> 2));
    for (int64_t j = 0; j < 4 && k + j < h; j++)
      d[k + j] = (uint32_t)(z >> (16 * j) & 0xffff) < dr.thr ? 0.0f : dr.scale;
  }
}
static inline void no_dropout(int64_t h, float *d) {
  for (int64_t k = 0; k < h; k++) d[k] = 1.0f;
}

// prefetch asks for the w floats at row, PF edges before they are read:
// the rows are gathered at random, so several misses must be in flight.
#define PF 8
static inline void prefetch(const float *row, int64_t w) {
  for (int64_t b = 0; b < w; b += 16) __builtin_prefetch(row + b);
}

static inline float leaky(float x) { return x < 0 ? 0.2f * x : x; }
static inline float leaky_slope(float x) { return x < 0 ? 0.2f : 1.0f; }

// per is the edges a chunk holds with h heads (at least one).
static inline int64_t per_chunk(int64_t h) { return h < CHUNK ? CHUNK / h : 1; }

#define GAT_KERNELS(SUFFIX, ATTR)                                              \
  VEXP(SUFFIX, ATTR)                                                           \
  /* x[0, n) = e^x in place (x ≤ 0); x holds whole vectors past n. */          \
  ATTR static inline void exp_chunk_##SUFFIX(float *x, int64_t n) {            \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    for (int64_t i = n; i % L; i++) x[i] = 0;                                  \
    for (int64_t i = 0; i < n; i += L) *(vf *)(x + i) = vexp_##SUFFIX(*(vf *)(x + i)); \
  }                                                                            \
  ATTR static inline float dot_##SUFFIX(const float *a, const float *b, int64_t n) { \
    float s = 0;                                                               \
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];                          \
    return s;                                                                  \
  }                                                                            \
  ATTR static void attend_##SUFFIX(const int64_t *rowptr, const int32_t *col, const float *src, \
      int64_t h, int64_t f, const float *el, float *m, float *s, float *o, float *o2, float *c, \
      int64_t r0, int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0, \
      const int64_t *sids, int64_t srow0) {                                    \
    const int64_t hf = h * f, w = hf + h, per = per_chunk(h), pend = rowptr[r1]; \
    const drop_of_t dr = drop_of(keep);                                        \
    float dsc[h];                                                              \
    no_dropout(h, dsc);                                                        \
    float x[per * h + 16], sl[per * h], cm[h];                                 \
    for (int64_t i = r0; i < r1; i++) {                                        \
      const int64_t target = id_of(tids, trow0, i);                            \
      const float *eli = el + i * h;                                           \
      float *mi = m + i * h, *si = s + i * h, *oi = o + i * hf;                \
      float *o2i = o2 ? o2 + i * hf : NULL, *ci = c ? c + i * h : NULL;        \
      for (int64_t p0 = rowptr[i]; p0 < rowptr[i + 1]; p0 += per) {            \
        const int64_t p1 = p0 + per < rowptr[i + 1] ? p0 + per : rowptr[i + 1]; \
        for (int64_t k = 0; k < h; k++) cm[k] = -INFINITY;                     \
        for (int64_t p = p0; p < p1; p++) {                                    \
          if (p + PF < pend) prefetch(src + (int64_t)col[p + PF] * w, w);      \
          const float *er = src + (int64_t)col[p] * w + hf;                    \
          float *xp = x + (p - p0) * h, *slp = sl + (p - p0) * h;              \
          for (int64_t k = 0; k < h; k++) {                                    \
            const float v = eli[k] + er[k];                                    \
            xp[k] = leaky(v), slp[k] = leaky_slope(v);                         \
            cm[k] = xp[k] > cm[k] ? xp[k] : cm[k];                             \
          }                                                                    \
        }                                                                      \
        for (int64_t k = 0; k < h; k++)                                        \
          if (cm[k] > mi[k]) { /* a larger maximum: rescale what is summed */  \
            const float sc = expf(mi[k] - cm[k]);                              \
            si[k] *= sc;                                                       \
            for (int64_t t = 0; t < f; t++) oi[k * f + t] *= sc;               \
            if (o2i) {                                                         \
              ci[k] *= sc;                                                     \
              for (int64_t t = 0; t < f; t++) o2i[k * f + t] *= sc;            \
            }                                                                  \
            mi[k] = cm[k];                                                     \
          }                                                                    \
        for (int64_t p = p0; p < p1; p++)                                      \
          for (int64_t k = 0; k < h; k++) x[(p - p0) * h + k] -= mi[k];        \
        exp_chunk_##SUFFIX(x, (p1 - p0) * h);                                  \
        for (int64_t p = p0; p < p1; p++) {                                    \
          const float *row = src + (int64_t)col[p] * w, *xp = x + (p - p0) * h; \
          const float *slp = sl + (p - p0) * h;                                \
          if (key) edge_scales(edge_key(key, target, id_of(sids, srow0, col[p])), h, dr, dsc); \
          for (int64_t k = 0; k < h; k++) {                                    \
            si[k] += xp[k]; /* dropped coefficients count here; they add 0 below */ \
            const float a = xp[k] * dsc[k], *u = row + k * f;                  \
            float *ok = oi + k * f;                                            \
            for (int64_t t = 0; t < f; t++) ok[t] += a * u[t];                 \
            if (o2i) {                                                         \
              const float b = a * slp[k];                                      \
              float *o2k = o2i + k * f;                                        \
              ci[k] += xp[k] * slp[k];                                         \
              for (int64_t t = 0; t < f; t++) o2k[t] += b * u[t];              \
            }                                                                  \
          }                                                                    \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  ATTR static void neighbour_##SUFFIX(const int64_t *rowptr, const int32_t *col, \
      const float *src, int64_t h, int64_t f, const float *own, float *dU, float *dEr, int64_t r0, \
      int64_t r1, uint64_t key, float keep, const int64_t *oids, int64_t orow0, \
      const int64_t *tids, int64_t trow0) {                                    \
    const int64_t hf = h * f, w = hf + h, gw = hf + 3 * h, per = per_chunk(h), pend = rowptr[r1]; \
    const drop_of_t dr = drop_of(keep);                                        \
    float dsc[h];                                                              \
    no_dropout(h, dsc);                                                        \
    float x[per * h + 16], sl[per * h], acc[h];                                \
    for (int64_t r = r0; r < r1; r++) {                                        \
      const int64_t source = id_of(oids, orow0, r);                            \
      const float *ur = own + r * w, *err = ur + hf;                           \
      float *du = dU + r * hf;                                                 \
      for (int64_t k = 0; k < h; k++) acc[k] = 0;                              \
      for (int64_t p0 = rowptr[r]; p0 < rowptr[r + 1]; p0 += per) {            \
        const int64_t p1 = p0 + per < rowptr[r + 1] ? p0 + per : rowptr[r + 1]; \
        for (int64_t p = p0; p < p1; p++) {                                    \
          if (p + PF < pend) prefetch(src + (int64_t)col[p + PF] * gw, gw);    \
          const float *t = src + (int64_t)col[p] * gw + hf; /* el | lse | δ */  \
          for (int64_t k = 0; k < h; k++) {                                    \
            const float v = t[k] + err[k];                                     \
            x[(p - p0) * h + k] = leaky(v) - t[h + k]; /* α = e^(score − lse) */ \
            sl[(p - p0) * h + k] = leaky_slope(v);                             \
          }                                                                    \
        }                                                                      \
        exp_chunk_##SUFFIX(x, (p1 - p0) * h);                                  \
        for (int64_t p = p0; p < p1; p++) {                                    \
          const float *g = src + (int64_t)col[p] * gw, *t = g + hf;            \
          if (key) edge_scales(edge_key(key, id_of(tids, trow0, col[p]), source), h, dr, dsc); \
          for (int64_t k = 0; k < h; k++) {                                    \
            const int64_t q = (p - p0) * h + k;                                \
            const float a = x[q], da = dsc[k] * a, *gk = g + k * f;            \
            float *duk = du + k * f;                                           \
            for (int64_t c = 0; c < f; c++) duk[c] += da * gk[c];              \
            const float gu = dsc[k] * dot_##SUFFIX(gk, ur + k * f, f);         \
            acc[k] += a * (gu - t[2 * h + k]) * sl[q];                         \
          }                                                                    \
        }                                                                      \
      }                                                                        \
      for (int64_t k = 0; k < h; k++) dEr[r * h + k] += acc[k];                \
    }                                                                          \
  }

GAT_KERNELS(base, )
#if defined(__x86_64__) && defined(__GNUC__)
GAT_KERNELS(avx2, __attribute__((target("avx2,fma"))))
GAT_KERNELS(avx512, __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma,prefer-vector-width=512"))))
#endif

// attend folds a block's source rows (src: [U | er] per row) into the running
// softmax (m, s) and outputs o of target rows [r0, r1). With o2 and c (a
// training forward) it also sums, rescaled alike, the outputs weighted by
// LeakyReLU's slope and the coefficients so weighted: what the backward's
// target side needs, ∂el_i = (G_i·o2_i − δ_i c_i)/s_i per head, with no
// second pass over the edges.
void sc_gat_attend(const int64_t *rowptr, const int32_t *col, const float *src, int64_t h, int64_t f,
                   const float *el, float *m, float *s, float *o, float *o2, float *c, int64_t r0,
                   int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0,
                   const int64_t *sids, int64_t srow0) {
  PICK3(attend, rowptr, col, src, h, f, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0);
}

// neighbour_side adds, for source rows r in [r0, r1) (own: their [U | er]
// as the targets used them), Σ_i d α G_i into dU and Σ_i ∂s_ir into dEr
// over the block's target rows (src: their [G | el | lse | δ]).
void sc_gat_neighbour(const int64_t *rowptr, const int32_t *col, const float *src, int64_t h, int64_t f,
                      const float *own, float *dU, float *dEr, int64_t r0, int64_t r1, uint64_t key,
                      float keep, const int64_t *oids, int64_t orow0, const int64_t *tids, int64_t trow0) {
  PICK3(neighbour, rowptr, col, src, h, f, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0);
}

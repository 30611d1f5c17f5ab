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
#include <string.h>
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
// The scale is selected by a mask, not a branch: half the draws fall
// either way, so a branch mispredicts on every other head.
static inline void edge_scales(uint64_t edge, int64_t h, drop_of_t dr, float *d) {
  uint32_t scale;
  memcpy(&scale, &dr.scale, sizeof scale);
  for (int64_t k = 0; k < h; k += 4) {
    const uint64_t z = sc_mix64(edge ^ (uint64_t)(k >> 2));
    for (int64_t j = 0; j < 4 && k + j < h; j++) {
      const uint32_t kept = scale & (0u - (uint32_t)((uint32_t)(z >> (16 * j) & 0xffff) >= dr.thr));
      memcpy(d + k + j, &kept, sizeof kept);
    }
  }
}
static inline void no_dropout(int64_t h, float *d) {
  for (int64_t k = 0; k < h; k++) d[k] = 1.0f;
}

// prefetch asks for the w floats at row before they are read: the rows
// are gathered at random, so several misses must be in flight. The
// scores' pass asks PF edges ahead. The pass that reads the rows asks PF2
// ahead, into the next rows' edges: the scores' pass is too short for its
// own requests to arrive, and would otherwise wait out a miss per edge.
// The 88 kernels' rows are five lines, and a chunk's scores' pass reads
// the first edges of the next chunk at once: they ask PF88 ahead, three
// chunks, so that a chunk's rows have arrived before its scores are read
// (results/README.md, stop 67). The neighbour side's scores' pass asks
// for nothing: its rows were asked for three chunks before, and asking
// again costs more than it gives.
#define PF 8
#define PF2 32
#define PF88 96
// PFO is the rows ahead whose outputs the 88 kernels ask for, to write.
#define PFO 4
static inline void prefetch(const float *row, int64_t w) {
  for (int64_t b = 0; b < w; b += 16) __builtin_prefetch(row + b);
}
// prefetch_l2 asks for them into L2 alone: a hidden layer's rows are 5 or
// 6 lines, and 8 edges' of them would hold more misses than L1 can track
// (as for the SpMM's gathers, cpu.c).
static inline void prefetch_l2(const float *row, int64_t w) {
  for (int64_t b = 0; b < w; b += 16) __builtin_prefetch(row + b, 0, 2);
}

static inline float leaky(float x) { return x < 0 ? 0.2f * x : x; }
static inline float leaky_slope(float x) { return x < 0 ? 0.2f : 1.0f; }

// per is the edges a chunk holds with h heads (at least one).
static inline int64_t per_chunk(int64_t h) { return h < CHUNK ? CHUNK / h : 1; }

#define INLINE inline __attribute__((always_inline))

// v8 is 8 floats, whatever the level (two xmm below AVX2).
typedef float v8 __attribute__((vector_size(32), aligned(4)));
// vi8 is a v8's comparison mask; u16x8 is an edge's eight 16-bit dropout
// draws; S8 spells a v8 of one value.
typedef int32_t vi8 __attribute__((vector_size(32), aligned(4)));
typedef uint16_t u16x8 __attribute__((vector_size(16), aligned(2)));
#define S8(x) x, x, x, x, x, x, x, x
// u64x8 is eight 64-bit lanes; mix64x8 is sc_mix64 in each, a macro so that
// each level's kernels compile it with their own instructions.
typedef uint64_t u64x8 __attribute__((vector_size(64)));
#define mix64x8(x)                                                             \
  ({                                                                           \
    u64x8 z_ = (x) + GOLDEN;                                                   \
    z_ = (z_ ^ (z_ >> 30)) * 0xbf58476d1ce4e5b9ULL;                            \
    z_ = (z_ ^ (z_ >> 27)) * 0x94d049bb133111ebULL;                            \
    z_ ^ (z_ >> 31);                                                           \
  })
// hv is what a level's 88 kernels sum a row's heads in: a v8 (one head)
// below AVX-512, a v16 (two heads) at it. spread(a, b) is hv block b's
// coefficients: each head's a[k] over its 8 features. Below AVX-512 that
// is a lane broadcast, as a[k]·v; at it one vpermps serves two heads,
// where a ymm broadcast a head took two shuffles on the shuffle port,
// which bound the loop on cores with one.
typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef int32_t vi16 __attribute__((vector_size(64)));
typedef v8 hv_base;
typedef v8 hv_avx2;
typedef v16 hv_avx512;
#define spread_base(a, b) ((v8){S8((a)[b])})
#define spread_avx2(a, b) ((v8){S8((a)[b])})
#if defined(__x86_64__) && defined(__GNUC__)
SC_AVX512 static inline v16 spread_avx512(v8 a, int b) {
  static const vi16 idx[4] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                              {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
                              {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
                              {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};
  const v16 w = __builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
  return __builtin_shuffle(w, idx[b]);
}
#endif
// HADD8 is (x0 + x1, x2 + x3, y0 + y1, y2 + y3) in each 4-float half.
#define HADD8(x, y)                                                            \
  (__builtin_shufflevector(x, y, 0, 2, 8, 10, 4, 6, 12, 14) +                  \
   __builtin_shufflevector(x, y, 1, 3, 9, 11, 5, 7, 13, 15))

// SHAPES runs call with H_ and F_ the heads and features per head: H_ a
// constant for one head (an output layer), else both as given. 8 heads of
// 8 have their own kernels (attend88, neighbour88), and so does one head
// of 1, 2 or 4 whole vectors (attend1_NV, neighbour1_NV).
#define SHAPES(h, f, call)                                                     \
  do {                                                                         \
    if (h == 1) {                                                              \
      enum { H_ = 1 };                                                         \
      const int64_t F_ = f;                                                    \
      call;                                                                    \
    } else {                                                                   \
      const int64_t H_ = h, F_ = f;                                            \
      call;                                                                    \
    }                                                                          \
  } while (0)

/* One head of F = NV·L features (an output layer), on whole vectors as
   the 88 kernels: a row's outputs and sums stay in registers over its
   edges. The forward's arithmetic is the general body's, in its order.
   The neighbour side sums Σ_p w_p·(G_p·U_r) as (Σ_p w_p·G_p)·U_r, one
   dot product a row where the general body takes one an edge. */
#define GAT_ONE_HEAD(SUFFIX, ATTR, NV)                                         \
  ATTR static void attend1_##NV##_##SUFFIX(const int64_t *rowptr, const int32_t *col, \
      const float *src, const float *el, float *m, float *s, float *o, float *o2, float *c, \
      int64_t r0, int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0, \
      const int64_t *sids, int64_t srow0) {                                    \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float), F = NV * L, W = F + 1, PER = CHUNK }; \
    const int64_t pend = rowptr[r1];                                           \
    const drop_of_t dr = drop_of(keep);                                        \
    float x[PER + 16], sl[PER], ds[PER + 8], dsc = 1.0f;                       \
    for (int64_t i = r0; i < r1; i++) {                                        \
      const int64_t target = id_of(tids, trow0, i);                            \
      const float eli = el[i];                                                 \
      float *oi = o + i * F, *o2i = o2 ? o2 + i * F : NULL;                    \
      for (int64_t p0 = rowptr[i]; p0 < rowptr[i + 1]; p0 += PER) {            \
        const int64_t p1 = p0 + PER < rowptr[i + 1] ? p0 + PER : rowptr[i + 1]; \
        float cm = -INFINITY;                                                  \
        for (int64_t p = p0; p < p1; p++) {                                    \
          if (p + PF < pend) prefetch(src + (int64_t)col[p + PF] * W, W);      \
          const float v = eli + src[(int64_t)col[p] * W + F];                  \
          x[p - p0] = leaky(v), sl[p - p0] = leaky_slope(v);                   \
          cm = x[p - p0] > cm ? x[p - p0] : cm;                                \
        }                                                                      \
        fold_max_##SUFFIX(&cm, m + i, s + i, oi, o2i, o2i ? c + i : NULL, 1, F); \
        const float mi = m[i];                                                 \
        for (int64_t p = p0; p < p1; p++) x[p - p0] -= mi;                     \
        exp_chunk_##SUFFIX(x, p1 - p0);                                        \
        if (key) chunk_scales_##SUFFIX(col, p0, p1, key, target, 1, sids, srow0, dr, ds); \
        vf O[NV], O2[NV];                                                      \
        float S = s[i], C = 0;                                                 \
        for (int v = 0; v < NV; v++) O[v] = *(const vf *)(oi + v * L);         \
        if (o2i) {                                                             \
          C = c[i];                                                            \
          for (int v = 0; v < NV; v++) O2[v] = *(const vf *)(o2i + v * L);     \
        }                                                                      \
        for (int64_t p = p0; p < p1; p++) {                                    \
          const float *row = src + (int64_t)col[p] * W;                        \
          if (p + PF2 < pend) prefetch(src + (int64_t)col[p + PF2] * W, W);    \
          if (key) dsc = ds[p - p0];                                           \
          const float xp = x[p - p0], av = xp * dsc;                           \
          S += xp; /* dropped coefficients count here; they add 0 below */     \
          if (o2i) {                                                           \
            const float bv = av * sl[p - p0];                                  \
            C += xp * sl[p - p0];                                              \
            for (int v = 0; v < NV; v++) {                                     \
              const vf rv = *(const vf *)(row + v * L);                        \
              O[v] += av * rv;                                                 \
              O2[v] += bv * rv;                                                \
            }                                                                  \
          } else {                                                             \
            for (int v = 0; v < NV; v++) O[v] += av * *(const vf *)(row + v * L); \
          }                                                                    \
        }                                                                      \
        s[i] = S;                                                              \
        for (int v = 0; v < NV; v++) *(vf *)(oi + v * L) = O[v];               \
        if (o2i) {                                                             \
          c[i] = C;                                                            \
          for (int v = 0; v < NV; v++) *(vf *)(o2i + v * L) = O2[v];           \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  ATTR static void neighbour1_##NV##_##SUFFIX(const int64_t *rowptr, const int32_t *col, \
      const float *src, const float *own, float *dU, float *dEr, int64_t r0, int64_t r1, \
      uint64_t key, float keep, const int64_t *oids, int64_t orow0, const int64_t *tids, \
      int64_t trow0) {                                                         \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float), F = NV * L, W = F + 1, GW = F + 3, PER = CHUNK }; \
    const int64_t pend = rowptr[r1];                                           \
    const drop_of_t dr = drop_of(keep);                                        \
    float x[PER + 16], sl[PER], ds[PER + 8], dsc = 1.0f;                       \
    for (int64_t r = r0; r < r1; r++) {                                        \
      const int64_t source = id_of(oids, orow0, r);                            \
      const float *ur = own + r * W, err = ur[F];                              \
      float *du = dU + r * F, acc = 0;                                         \
      vf DU[NV], UR[NV], GS[NV];                                               \
      for (int v = 0; v < NV; v++) {                                           \
        DU[v] = *(const vf *)(du + v * L);                                     \
        UR[v] = *(const vf *)(ur + v * L);                                     \
        GS[v] = (vf){0};                                                       \
      }                                                                        \
      for (int64_t p0 = rowptr[r]; p0 < rowptr[r + 1]; p0 += PER) {            \
        const int64_t p1 = p0 + PER < rowptr[r + 1] ? p0 + PER : rowptr[r + 1]; \
        for (int64_t p = p0; p < p1; p++) {                                    \
          if (p + PF < pend) prefetch(src + (int64_t)col[p + PF] * GW, GW);    \
          const float *t = src + (int64_t)col[p] * GW + F; /* el | lse | δ */  \
          const float v = t[0] + err;                                          \
          x[p - p0] = leaky(v) - t[1]; /* α = e^(score − lse) */               \
          sl[p - p0] = leaky_slope(v);                                         \
        }                                                                      \
        exp_chunk_##SUFFIX(x, p1 - p0);                                        \
        if (key) chunk_scales_##SUFFIX(col, p0, p1, key, source, 0, tids, trow0, dr, ds); \
        for (int64_t p = p0; p < p1; p++) {                                    \
          const float *g = src + (int64_t)col[p] * GW;                         \
          if (p + PF2 < pend) prefetch(src + (int64_t)col[p + PF2] * GW, GW);  \
          if (key) dsc = ds[p - p0];                                           \
          const float xp = x[p - p0], da = dsc * xp, ws = da * sl[p - p0];     \
          for (int v = 0; v < NV; v++) {                                       \
            const vf gk = *(const vf *)(g + v * L);                            \
            DU[v] += da * gk;                                                  \
            GS[v] += ws * gk;                                                  \
          }                                                                    \
          acc -= xp * g[F + 2] * sl[p - p0];                                   \
        }                                                                      \
      }                                                                        \
      vf gu = GS[0] * UR[0];                                                   \
      for (int v = 1; v < NV; v++) gu += GS[v] * UR[v];                        \
      acc += hsum_##SUFFIX(gu);                                                \
      for (int v = 0; v < NV; v++) *(vf *)(du + v * L) = DU[v];                \
      dEr[r] += acc;                                                           \
    }                                                                          \
  }


#define GAT_KERNELS(SUFFIX, ATTR)                                              \
  VEXP(SUFFIX, ATTR)                                                           \
  /* x[0, n) = e^x in place (x ≤ 0); x holds whole vectors past n. */          \
  ATTR static inline void exp_chunk_##SUFFIX(float *x, int64_t n) {            \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    for (int64_t i = n; i % L; i++) x[i] = 0;                                  \
    for (int64_t i = 0; i < n; i += L) *(vf *)(x + i) = vexp_##SUFFIX(*(vf *)(x + i)); \
  }                                                                            \
  /* d[k] = a[8k, 8k + 8)·b[8k, 8k + 8), k < 8: the products summed       \
     pairwise across the 8 rows at once (the horizontal adds of a            \
     transpose), not one row at a time. */                                   \
  ATTR static INLINE void sum8_##SUFFIX(float *d, const float *a, const float *b) { \
    v8 p[8];                                                                   \
    for (int k = 0; k < 8; k++) p[k] = *(const v8 *)(a + 8 * k) * *(const v8 *)(b + 8 * k); \
    const v8 u0 = HADD8(HADD8(p[0], p[1]), HADD8(p[2], p[3]));                 \
    const v8 u1 = HADD8(HADD8(p[4], p[5]), HADD8(p[6], p[7]));                 \
    *(v8 *)d = __builtin_shufflevector(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11) +     \
               __builtin_shufflevector(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15);    \
  }                                                                            \
  /* fold_max takes a chunk's maxima cm into a row's running maxima mi:        \
     a larger one rescales what the row has summed (si, oi and, kept for       \
     a backward, ci and o2i) by e^(old − new). */                              \
  ATTR static INLINE void fold_max_##SUFFIX(const float *cm, float *mi, float *si, float *oi, \
      float *o2i, float *ci, int64_t h, int64_t f) {                           \
    for (int64_t k = 0; k < h; k++)                                            \
      if (mi[k] == -INFINITY) /* the row's first edges: nothing summed */      \
        mi[k] = cm[k];                                                         \
      else if (cm[k] > mi[k]) {                                                \
        const float sc = expf(mi[k] - cm[k]);                                  \
        si[k] *= sc;                                                           \
        for (int64_t t = 0; t < f; t++) oi[k * f + t] *= sc;                   \
        if (o2i) {                                                             \
          ci[k] *= sc;                                                         \
          for (int64_t t = 0; t < f; t++) o2i[k * f + t] *= sc;                \
        }                                                                      \
        mi[k] = cm[k];                                                         \
      }                                                                        \
  }                                                                            \
  /* 8 heads of 8 features, the usual hidden layer, on whole vectors: a        \
     row's outputs and sums stay in registers over its edges, the scores of    \
     an edge's heads are one v8, and the dropout draws of an edge are          \
     compared eight at once. Same arithmetic, in the same order, as the        \
     general bodies below, but for the rescale at a larger maximum: its        \
     exponentials are taken on a vector, as the scores' are. */                \
  ATTR static INLINE void leaky8_##SUFFIX(v8 *x, v8 *slope, const v8 *vp) {    \
    const v8 v = *vp;                                                          \
    const vi8 neg = v < 0;                                                     \
    *slope = (v8)((neg & (vi8)(v8){S8(0.2f)}) | (~neg & (vi8)(v8){S8(1.0f)})); \
    *x = (v8)((neg & (vi8)(0.2f * v)) | (~neg & (vi8)v));                      \
  }                                                                            \
  ATTR static INLINE void max8_##SUFFIX(v8 *a, const v8 *b) {                  \
    const vi8 gt = *b > *a;                                                    \
    *a = (v8)((gt & (vi8)*b) | (~gt & (vi8)*a));                               \
  }                                                                            \
  /* the eight heads' scales of edge_scales at once */                         \
  ATTR static INLINE void scales8_##SUFFIX(v8 *dsc, uint64_t edge, drop_of_t dr) { \
    const uint64_t z[2] = {sc_mix64(edge), sc_mix64(edge ^ 1)};                \
    u16x8 d;                                                                   \
    memcpy(&d, z, sizeof d);                                                   \
    uint32_t scale;                                                            \
    memcpy(&scale, &dr.scale, sizeof scale);                                   \
    const vi8 kept = __builtin_convertvector(d, vi8) >= (int32_t)dr.thr;       \
    *dsc = (v8)(kept & (int32_t)scale);                                        \
  }                                                                            \
  /* chunk_scales writes the dropout scales of one head on a row's edges       \
     [p0, p1) at d[p − p0]: edge_scales of edge_key on eight edges at once,    \
     in 64-bit lanes. The row is the target (fwd: the forward, edge p's        \
     source is col[p]'s id) or the source (the neighbour side, col[p]'s id     \
     the target). d holds eight edges past p1. The one-head kernels ask for   \
     it at every level; the 88 kernels ask for chunk_scales8 at AVX-512, and   \
     below it hash each edge as they go. */                                    \
  /* edge_keys8 writes edge_key of a row's edges [q, q + 8) into e (past p1,   \
     its last edge's). */                                                      \
  ATTR static INLINE void edge_keys8_##SUFFIX(u64x8 *e, const int32_t *col, int64_t q, int64_t p1, \
      uint64_t key, int64_t row, int fwd, const int64_t *ids, int64_t row0) { \
    /* the row's part of the key: key ^ target, or mix(source + GOLDEN) */     \
    const uint64_t part = fwd ? key ^ (uint64_t)row : sc_mix64((uint64_t)row + GOLDEN); \
    u64x8 id;                                                                  \
    for (int j = 0; j < 8; j++) id[j] = (uint64_t)id_of(ids, row0, col[q + j < p1 ? q + j : p1 - 1]); \
    *e = fwd ? mix64x8(part ^ mix64x8(id + GOLDEN)) : mix64x8((key ^ id) ^ part); \
  }                                                                            \
  ATTR static void chunk_scales_##SUFFIX(const int32_t *col, int64_t p0, int64_t p1, uint64_t key, \
      int64_t row, int fwd, const int64_t *ids, int64_t row0, drop_of_t dr, float *d) { \
    uint32_t scale;                                                            \
    memcpy(&scale, &dr.scale, sizeof scale);                                   \
    for (int64_t q = p0; q < p1; q += 8) {                                     \
      u64x8 e;                                                                 \
      edge_keys8_##SUFFIX(&e, col, q, p1, key, row, fwd, ids, row0);           \
      const vi8 kept = __builtin_convertvector(mix64x8(e) & 0xffff, vi8) >= (int32_t)dr.thr; \
      const v8 sc = (v8)(kept & (int32_t)scale);                               \
      memcpy(d + (q - p0), &sc, sizeof sc);                                    \
    }                                                                          \
  }                                                                            \
  /* chunk_scales8 is scales8 of edge_key on eight edges at once, for the    \
     88 kernels where the level has 64-bit lanes to multiply in (AVX-512):   \
     edge p's eight scales at d[p − p0], the row and ids as chunk_scales'.   \
     Hashed an edge at a time, the dropout's draws were a third of the      \
     forward's time with the rows in cache. */                               \
  ATTR static void chunk_scales8_##SUFFIX(const int32_t *col, int64_t p0, int64_t p1, uint64_t key, \
      int64_t row, int fwd, const int64_t *ids, int64_t row0, drop_of_t dr, v8 *d) { \
    typedef uint16_t u16x32 __attribute__((vector_size(64)));                  \
    typedef uint16_t u16x16 __attribute__((vector_size(32)));                  \
    int32_t scale;                                                             \
    memcpy(&scale, &dr.scale, sizeof scale);                                   \
    for (int64_t q = p0; q < p1; q += 8) {                                     \
      u64x8 e;                                                                 \
      edge_keys8_##SUFFIX(&e, col, q, p1, key, row, fwd, ids, row0);           \
      const u64x8 z0 = mix64x8(e), z1 = mix64x8(e ^ 1);                        \
      /* edge j's draws: z0[j]'s four 16-bit parts, then z1[j]'s */            \
      const u64x8 zz[2] = {__builtin_shufflevector(z0, z1, 0, 8, 1, 9, 2, 10, 3, 11), \
                           __builtin_shufflevector(z0, z1, 4, 12, 5, 13, 6, 14, 7, 15)}; \
      for (int hlf = 0; hlf < 2; hlf++) {                                      \
        const u16x32 w = (u16x32)zz[hlf];                                      \
        const u16x16 pair[2] = {__builtin_shufflevector(w, w, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), \
            __builtin_shufflevector(w, w, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31)}; \
        for (int t = 0; t < 2; t++) {                                          \
          const vi16 kept = __builtin_convertvector(pair[t], vi16) >= (int32_t)dr.thr; \
          const vi16 sc = kept & scale;                                        \
          memcpy(d + (q - p0) + 4 * hlf + 2 * t, &sc, sizeof sc);              \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  ATTR static void attend88_##SUFFIX(const int64_t *rowptr, const int32_t *col, const float *src, \
      const float *el, float *m, float *s, float *o, float *o2, float *c, int64_t r0, int64_t r1, \
      uint64_t key, float keep, const int64_t *tids, int64_t trow0, const int64_t *sids, \
      int64_t srow0) {                                                         \
    typedef hv_##SUFFIX hv;                                                    \
    enum { H = 8, HF = 64, W = 72, PER = CHUNK / H, BW = sizeof(hv) / sizeof(float), NB = HF / BW, \
           VHASH = sizeof(vf_##SUFFIX) == 64 };                                \
    const int64_t pend = rowptr[r1];                                           \
    const drop_of_t dr = drop_of(keep);                                        \
    v8 x[PER + 1], sl[PER], ds[PER + 8], dsc = {S8(1.0f)};                     \
    for (int64_t i = r0; i < r1; i++) {                                        \
      const int64_t target = id_of(tids, trow0, i);                            \
      if (i + PFO < r1) {                                                      \
        for (int b = 0; b < HF; b += 16) __builtin_prefetch(o + (i + PFO) * HF + b, 1); \
        if (o2) for (int b = 0; b < HF; b += 16) __builtin_prefetch(o2 + (i + PFO) * HF + b, 1); \
      }                                                                        \
      const v8 eli = *(const v8 *)(el + i * H);                                \
      float *mi = m + i * H, *si = s + i * H, *oi = o + i * HF;                \
      float *o2i = o2 ? o2 + i * HF : NULL, *ci = c ? c + i * H : NULL;        \
      for (int64_t p0 = rowptr[i]; p0 < rowptr[i + 1]; p0 += PER) {            \
        const int64_t p1 = p0 + PER < rowptr[i + 1] ? p0 + PER : rowptr[i + 1]; \
        v8 cm = {S8(-INFINITY)};                                               \
        for (int64_t p = p0; p < p1; p++) {                                    \
          if (p + PF < pend) prefetch_l2(src + (int64_t)col[p + PF] * W, W);      \
          const v8 v = eli + *(const v8 *)(src + (int64_t)col[p] * W + HF);    \
          leaky8_##SUFFIX(&x[p - p0], &sl[p - p0], &v);                        \
          max8_##SUFFIX(&cm, &x[p - p0]);                                      \
        }                                                                      \
        if (key && VHASH) chunk_scales8_##SUFFIX(col, p0, p1, key, target, 1, sids, srow0, dr, ds); \
        /* fold_max on vectors, the rescale applied as the sums are loaded:    \
           a row met again (a later chunk or block) with a larger maximum */   \
        const int fresh = mi[0] == -INFINITY; /* O, O2, C as the last pass left them */ \
        const v8 mold = *(const v8 *)mi;                                       \
        const vi8 up = cm > mold;                                              \
        const v8 mv = fresh ? cm : (v8)((up & (vi8)cm) | (~up & (vi8)mold));   \
        *(v8 *)mi = mv;                                                        \
        for (int64_t p = p0; p < p1; p++) x[p - p0] -= mv;                     \
        exp_chunk_##SUFFIX((float *)x, (p1 - p0) * H);                         \
        hv O[NB] = {{0}}, O2[NB] = {{0}};                                      \
        v8 S = *(const v8 *)si, C = {0};                                       \
        if (!fresh) {                                                          \
          v8 sc[2] = {mold - mv, {0}};                                         \
          exp_chunk_##SUFFIX((float *)sc, H);                                  \
          sc[0] = (v8)((up & (vi8)sc[0]) | (~up & (vi8)(v8){S8(1.0f)}));       \
          S *= sc[0];                                                          \
          for (int b = 0; b < NB; b++) O[b] = *(const hv *)(oi + BW * b) * spread_##SUFFIX(sc[0], b); \
          if (o2i) {                                                           \
            C = *(const v8 *)ci * sc[0];                                       \
            for (int b = 0; b < NB; b++) O2[b] = *(const hv *)(o2i + BW * b) * spread_##SUFFIX(sc[0], b); \
          }                                                                    \
        }                                                                      \
        for (int64_t p = p0; p < p1; p++) {                                    \
          const float *row = src + (int64_t)col[p] * W;                        \
          if (p + PF88 < pend) prefetch_l2(src + (int64_t)col[p + PF88] * W, W); \
          const v8 xp = x[p - p0];                                             \
          if (key && VHASH) dsc = ds[p - p0];                                  \
          else if (key) scales8_##SUFFIX(&dsc, edge_key(key, target, id_of(sids, srow0, col[p])), dr); \
          S += xp; /* dropped coefficients count here; they add 0 below */     \
          const v8 av = xp * dsc;                                              \
          if (o2i) {                                                           \
            const v8 bv = av * sl[p - p0];                                     \
            C += xp * sl[p - p0];                                              \
            for (int b = 0; b < NB; b++) {                                     \
              const hv rb = *(const hv *)(row + BW * b);                       \
              O[b] += spread_##SUFFIX(av, b) * rb;                             \
              O2[b] += spread_##SUFFIX(bv, b) * rb;                            \
            }                                                                  \
          } else {                                                             \
            for (int b = 0; b < NB; b++)                                       \
              O[b] += spread_##SUFFIX(av, b) * *(const hv *)(row + BW * b);    \
          }                                                                    \
        }                                                                      \
        *(v8 *)si = S;                                                         \
        for (int b = 0; b < NB; b++) *(hv *)(oi + BW * b) = O[b];              \
        if (o2i) {                                                             \
          *(v8 *)ci = C;                                                       \
          for (int b = 0; b < NB; b++) *(hv *)(o2i + BW * b) = O2[b];          \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  ATTR static void neighbour88_##SUFFIX(const int64_t *rowptr, const int32_t *col, const float *src, \
      const float *own, float *dU, float *dEr, int64_t r0, int64_t r1, uint64_t key, float keep, \
      const int64_t *oids, int64_t orow0, const int64_t *tids, int64_t trow0) { \
    typedef hv_##SUFFIX hv;                                                    \
    enum { H = 8, HF = 64, W = 72, GW = 88, PER = CHUNK / H, BW = sizeof(hv) / sizeof(float), NB = HF / BW, \
           VHASH = sizeof(vf_##SUFFIX) == 64 };                                \
    const int64_t pend = rowptr[r1];                                           \
    const drop_of_t dr = drop_of(keep);                                        \
    v8 x[PER + 1], sl[PER], ds[PER + 8], dsc = {S8(1.0f)};                     \
    for (int64_t r = r0; r < r1; r++) {                                        \
      const int64_t source = id_of(oids, orow0, r);                            \
      if (r + PFO < r1)                                                        \
        for (int b = 0; b < HF; b += 16) __builtin_prefetch(dU + (r + PFO) * HF + b, 1); \
      const float *ur = own + r * W;                                           \
      const v8 err = *(const v8 *)(ur + HF);                                   \
      float *du = dU + r * HF;                                                 \
      hv DU[NB], GS[NB] = {{0}};                                               \
      v8 acc = {0};                                                            \
      for (int b = 0; b < NB; b++) DU[b] = *(const hv *)(du + BW * b);         \
      for (int64_t p0 = rowptr[r]; p0 < rowptr[r + 1]; p0 += PER) {            \
        const int64_t p1 = p0 + PER < rowptr[r + 1] ? p0 + PER : rowptr[r + 1]; \
        for (int64_t p = p0; p < p1; p++) {                                    \
          const float *t = src + (int64_t)col[p] * GW + HF; /* el | lse | δ */ \
          /* α = e^(score − lse) */                                            \
          const v8 v = *(const v8 *)t + err;                                   \
          leaky8_##SUFFIX(&x[p - p0], &sl[p - p0], &v);                        \
          x[p - p0] -= *(const v8 *)(t + H);                                   \
        }                                                                      \
        if (key && VHASH) chunk_scales8_##SUFFIX(col, p0, p1, key, source, 0, tids, trow0, dr, ds); \
        exp_chunk_##SUFFIX((float *)x, (p1 - p0) * H);                         \
        for (int64_t p = p0; p < p1; p++) {                                    \
          const float *g = src + (int64_t)col[p] * GW;                         \
          if (p + PF88 < pend) prefetch_l2(src + (int64_t)col[p + PF88] * GW, GW); \
          if (key && VHASH) dsc = ds[p - p0];                                  \
          else if (key) scales8_##SUFFIX(&dsc, edge_key(key, id_of(tids, trow0, col[p]), source), dr); \
          const v8 xp = x[p - p0], da = dsc * xp, ws = da * sl[p - p0];        \
          for (int b = 0; b < NB; b++) {                                       \
            const hv gb = *(const hv *)(g + BW * b);                           \
            DU[b] += spread_##SUFFIX(da, b) * gb;                              \
            GS[b] += spread_##SUFFIX(ws, b) * gb;                              \
          }                                                                    \
          acc -= xp * *(const v8 *)(g + HF + 2 * H) * sl[p - p0];              \
        }                                                                      \
      }                                                                        \
      /* Σ_p w_p·(G_p·U_r) per head, as (Σ_p w_p·G_p)·U_r: one dot product \
         a row, not one an edge */                                            \
      v8 gu;                                                                   \
      sum8_##SUFFIX((float *)&gu, (const float *)GS, ur);                      \
      for (int b = 0; b < NB; b++) *(hv *)(du + BW * b) = DU[b];               \
      *(v8 *)(dEr + r * H) += acc + gu;                                        \
    }                                                                          \
  }                                                                            \
  ATTR static inline float hsum_##SUFFIX(vf_##SUFFIX v) {                    \
    float s = 0;                                                               \
    for (int l = 0; l < (int)(sizeof(v) / sizeof(float)); l++) s += v[l];      \
    return s;                                                                  \
  }                                                                            \
  /* o[kf, kf + f) += a[k]·u[kf, kf + f) for each head k: a head's f     \
     features as whole vectors (the level's, else xmm) where f allows. */    \
  ATTR static inline void heads_axpy_##SUFFIX(float *restrict o, const float *restrict u, \
      const float *restrict a, int64_t h, int64_t f) {                         \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    if (f % L == 0) {                                                          \
      for (int64_t k = 0; k < h; k++)                                          \
        for (int64_t t = k * f; t < (k + 1) * f; t += L)                       \
          *(vf *)(o + t) += a[k] * *(const vf *)(u + t);                       \
    } else if (f % 4 == 0) {                                                   \
      for (int64_t k = 0; k < h; k++)                                          \
        for (int64_t t = k * f; t < (k + 1) * f; t += 4)                       \
          *(vf_base *)(o + t) += a[k] * *(const vf_base *)(u + t);             \
    } else {                                                                   \
      for (int64_t k = 0; k < h; k++)                                          \
        for (int64_t t = k * f; t < (k + 1) * f; t++) o[t] += a[k] * u[t];     \
    }                                                                          \
  }                                                                            \
  /* d[k] = a[kf, kf + f)·b[kf, kf + f) for each head k. */                  \
  ATTR static inline void heads_dot_##SUFFIX(float *restrict d, const float *restrict a, \
      const float *restrict b, int64_t h, int64_t f) {                         \
    typedef vf_##SUFFIX vf;                                                    \
    enum { L = sizeof(vf) / sizeof(float) };                                   \
    if (h == 8 && f == 8) {                                                    \
      sum8_##SUFFIX(d, a, b);                                                   \
      return;                                                                  \
    }                                                                          \
    if (f % L == 0) {                                                          \
      for (int64_t k = 0; k < h; k++) {                                        \
        vf s = *(const vf *)(a + k * f) * *(const vf *)(b + k * f);            \
        for (int64_t t = k * f + L; t < (k + 1) * f; t += L)                   \
          s += *(const vf *)(a + t) * *(const vf *)(b + t);                    \
        d[k] = hsum_##SUFFIX(s);                                               \
      }                                                                        \
      return;                                                                  \
    }                                                                          \
    for (int64_t k = 0; k < h; k++) {                                          \
      float s = 0;                                                             \
      for (int64_t t = k * f; t < (k + 1) * f; t++) s += a[t] * b[t];          \
      d[k] = s;                                                                \
    }                                                                          \
  }                                                                            \
  GAT_ONE_HEAD(SUFFIX, ATTR, 1)                                                \
  GAT_ONE_HEAD(SUFFIX, ATTR, 2)                                                \
  GAT_ONE_HEAD(SUFFIX, ATTR, 4)                                                \
  ATTR INLINE static void attend_body_##SUFFIX(const int64_t *rowptr, const int32_t *col, const float *src, \
      int64_t h, int64_t f, const float *el, float *m, float *s, float *o, float *o2, float *c, \
      int64_t r0, int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0, \
      const int64_t *sids, int64_t srow0) {                                    \
    const int64_t hf = h * f, w = hf + h, per = per_chunk(h), pend = rowptr[r1]; \
    const drop_of_t dr = drop_of(keep);                                        \
    float dsc[h];                                                              \
    no_dropout(h, dsc);                                                        \
    float x[per * h + 16], sl[per * h], cm[h], av[h], bv[h];                   \
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
        fold_max_##SUFFIX(cm, mi, si, oi, o2i, ci, h, f);                      \
        for (int64_t p = p0; p < p1; p++)                                      \
          for (int64_t k = 0; k < h; k++) x[(p - p0) * h + k] -= mi[k];        \
        exp_chunk_##SUFFIX(x, (p1 - p0) * h);                                  \
        for (int64_t p = p0; p < p1; p++) {                                    \
          const float *row = src + (int64_t)col[p] * w, *xp = x + (p - p0) * h; \
          if (p + PF2 < pend) prefetch(src + (int64_t)col[p + PF2] * w, w);    \
          const float *slp = sl + (p - p0) * h;                                \
          if (key) edge_scales(edge_key(key, target, id_of(sids, srow0, col[p])), h, dr, dsc); \
          for (int64_t k = 0; k < h; k++) {                                    \
            si[k] += xp[k]; /* dropped coefficients count here; they add 0 below */ \
            av[k] = xp[k] * dsc[k];                                            \
          }                                                                    \
          heads_axpy_##SUFFIX(oi, row, av, h, f);                              \
          if (o2i) {                                                           \
            for (int64_t k = 0; k < h; k++) {                                  \
              bv[k] = av[k] * slp[k];                                          \
              ci[k] += xp[k] * slp[k];                                         \
            }                                                                  \
            heads_axpy_##SUFFIX(o2i, row, bv, h, f);                           \
          }                                                                    \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  ATTR INLINE static void neighbour_body_##SUFFIX(const int64_t *rowptr, const int32_t *col, \
      const float *src, int64_t h, int64_t f, const float *own, float *dU, float *dEr, int64_t r0, \
      int64_t r1, uint64_t key, float keep, const int64_t *oids, int64_t orow0, \
      const int64_t *tids, int64_t trow0) {                                    \
    const int64_t hf = h * f, w = hf + h, gw = hf + 3 * h, per = per_chunk(h), pend = rowptr[r1]; \
    const drop_of_t dr = drop_of(keep);                                        \
    float dsc[h];                                                              \
    no_dropout(h, dsc);                                                        \
    float x[per * h + 16], sl[per * h], acc[h], da[h], gu[h];                  \
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
          if (p + PF2 < pend) prefetch(src + (int64_t)col[p + PF2] * gw, gw);  \
          if (key) edge_scales(edge_key(key, id_of(tids, trow0, col[p]), source), h, dr, dsc); \
          const float *xp = x + (p - p0) * h, *slp = sl + (p - p0) * h;        \
          for (int64_t k = 0; k < h; k++) da[k] = dsc[k] * xp[k];              \
          heads_axpy_##SUFFIX(du, g, da, h, f);                                \
          heads_dot_##SUFFIX(gu, g, ur, h, f);                                 \
          for (int64_t k = 0; k < h; k++)                                      \
            acc[k] += xp[k] * (dsc[k] * gu[k] - t[2 * h + k]) * slp[k];        \
        }                                                                      \
      }                                                                        \
      for (int64_t k = 0; k < h; k++) dEr[r * h + k] += acc[k];                \
    }                                                                          \
  }                                                                            \
  /* The bodies above compiled for the usual shapes, where h and f are    \
     constants: the head loops unroll into whole vectors. */                 \
  ATTR static void attend_##SUFFIX(const int64_t *rowptr, const int32_t *col, const float *src, \
      int64_t h, int64_t f, const float *el, float *m, float *s, float *o, float *o2, float *c, \
      int64_t r0, int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0, \
      const int64_t *sids, int64_t srow0) {                                    \
    if (h == 8 && f == 8) {                                                    \
      attend88_##SUFFIX(rowptr, col, src, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0);\
      return;                                                                  \
    }                                                                          \
    if (h == 1 && f % (int64_t)(sizeof(vf_##SUFFIX) / sizeof(float)) == 0) {  \
      switch (f / (int64_t)(sizeof(vf_##SUFFIX) / sizeof(float))) {            \
      case 1: attend1_1_##SUFFIX(rowptr, col, src, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0); return; \
      case 2: attend1_2_##SUFFIX(rowptr, col, src, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0); return; \
      case 4: attend1_4_##SUFFIX(rowptr, col, src, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0); return; \
      }                                                                        \
    }                                                                          \
    SHAPES(h, f, attend_body_##SUFFIX(rowptr, col, src, H_, F_, el, m, s, o, o2, c, r0, r1, key, \
        keep, tids, trow0, sids, srow0));                                     \
  }                                                                            \
  ATTR static void neighbour_##SUFFIX(const int64_t *rowptr, const int32_t *col, \
      const float *src, int64_t h, int64_t f, const float *own, float *dU, float *dEr, int64_t r0, \
      int64_t r1, uint64_t key, float keep, const int64_t *oids, int64_t orow0, \
      const int64_t *tids, int64_t trow0) {                                    \
    if (h == 8 && f == 8) {                                                    \
      neighbour88_##SUFFIX(rowptr, col, src, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0);\
      return;                                                                  \
    }                                                                          \
    if (h == 1 && f % (int64_t)(sizeof(vf_##SUFFIX) / sizeof(float)) == 0) {  \
      switch (f / (int64_t)(sizeof(vf_##SUFFIX) / sizeof(float))) {            \
      case 1: neighbour1_1_##SUFFIX(rowptr, col, src, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0); return; \
      case 2: neighbour1_2_##SUFFIX(rowptr, col, src, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0); return; \
      case 4: neighbour1_4_##SUFFIX(rowptr, col, src, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0); return; \
      }                                                                        \
    }                                                                          \
    SHAPES(h, f, neighbour_body_##SUFFIX(rowptr, col, src, H_, F_, own, dU, dEr, r0, r1, key, \
        keep, oids, orow0, tids, trow0));                                      \
  }                                                                            \
  ATTR static void pay_rows_##SUFFIX(float *pay, float *el, const float *u, const float *al, \
      const float *ar, int64_t h, int64_t f, int64_t r0, int64_t r1) {         \
    const int64_t hf = h * f, w = hf + h;                                      \
    for (int64_t i = r0; i < r1; i++) {                                        \
      const float *ui = u + i * hf;                                            \
      float *pi = pay + i * w;                                                 \
      for (int64_t x = 0; x < hf; x++) pi[x] = ui[x];                          \
      heads_dot_##SUFFIX(pi + hf, ui, ar, h, f);                               \
      if (el) heads_dot_##SUFFIX(el + i * h, ui, al, h, f);                    \
    }                                                                          \
  }                                                                            \
  ATTR static void outputs_##SUFFIX(float *z, int64_t zc, float *o, const float *s, int64_t h, \
      int64_t f, int concat, int64_t r0, int64_t r1) {                         \
    const int64_t hf = h * f;                                                  \
    for (int64_t i = r0; i < r1; i++) {                                        \
      float *oi = o + i * hf, *zi = z + i * zc;                                \
      for (int64_t k = 0; k < h; k++) {                                        \
        const float sk = s[i * h + k];                                         \
        if (sk > 0)                                                            \
          for (int64_t t = k * f; t < (k + 1) * f; t++) oi[t] *= 1.0f / sk;    \
      }                                                                        \
      if (concat) {                                                            \
        for (int64_t x = 0; x < hf; x++) zi[x] = oi[x];                        \
        continue;                                                              \
      }                                                                        \
      for (int64_t t = 0; t < f; t++) zi[t] = 0;                               \
      for (int64_t k = 0; k < h; k++)                                          \
        for (int64_t t = 0; t < f; t++) zi[t] += oi[k * f + t];                \
      const float inv = 1.0f / (float)h;                                       \
      for (int64_t t = 0; t < f; t++) zi[t] *= inv;                            \
    }                                                                          \
  }                                                                            \
  ATTR static void gradient_rows_##SUFFIX(float *gpay, float *dEl, const float *g, int64_t gc, \
      const float *el, const float *m, const float *s, const float *o, const float *o2, \
      const float *c, int64_t h, int64_t f, int concat, int64_t r0, int64_t r1) { \
    const int64_t hf = h * f, gw = hf + 3 * h;                                 \
    const float inv = 1.0f / (float)h;                                         \
    float delta[h], d2[h];                                                     \
    for (int64_t i = r0; i < r1; i++) {                                        \
      float *row = gpay + i * gw;                                              \
      const float *gi = g + i * gc;                                            \
      if (concat)                                                              \
        for (int64_t x = 0; x < hf; x++) row[x] = gi[x];                       \
      else /* the mean's share of each head */                                 \
        for (int64_t k = 0; k < h; k++)                                        \
          for (int64_t t = 0; t < f; t++) row[k * f + t] = gi[t] * inv;        \
      heads_dot_##SUFFIX(delta, row, o + i * hf, h, f);                        \
      heads_dot_##SUFFIX(d2, row, o2 + i * hf, h, f);                          \
      for (int64_t k = 0; k < h; k++) {                                        \
        const int64_t ik = i * h + k;                                          \
        const float sk = s[ik];                                                \
        /* a row without neighbours is no one's target */                      \
        row[hf + k] = el[ik], row[hf + h + k] = sk > 0 ? m[ik] + logf(sk) : -INFINITY; \
        row[hf + 2 * h + k] = delta[k];                                        \
        dEl[ik] = sk > 0 ? (d2[k] - delta[k] * c[ik]) / sk : 0; /* the target side */ \
      }                                                                        \
    }                                                                          \
  }                                                                            \
  ATTR static void score_grads_##SUFFIX(float *dU, const float *dEl, const float *dEr, \
      const float *u, const float *own, int64_t ow, const float *al, const float *ar, \
      int64_t h, int64_t f, int64_t r0, int64_t r1, float *part) {             \
    const int64_t hf = h * f;                                                  \
    float *dal = part, *dar = part + hf;                                       \
    for (int64_t x = 0; x < 2 * hf; x++) part[x] = 0;                          \
    for (int64_t i = r0; i < r1; i++) {                                        \
      const float *gl = dEl + i * h, *gr = dEr + i * h;                        \
      heads_axpy_##SUFFIX(dU + i * hf, al, gl, h, f);                          \
      heads_axpy_##SUFFIX(dU + i * hf, ar, gr, h, f);                          \
      heads_axpy_##SUFFIX(dal, u + i * hf, gl, h, f);                          \
      heads_axpy_##SUFFIX(dar, own + i * ow, gr, h, f);                        \
    }                                                                          \
  }

GAT_KERNELS(base, )
#if defined(__x86_64__) && defined(__GNUC__)
GAT_KERNELS(avx2, SC_AVX2)
GAT_KERNELS(avx512, SC_AVX512)
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

// score_grads carries rows [r0, r1)'s ∂el and ∂er into dU (dU_i += ∂el_i·a_l
// + ∂er_i·a_r, per head) and writes their shares of the attention vectors'
// gradients into part: Σ ∂el_i·U_i, then Σ ∂er_i·own_i (own's rows ow wide).
void sc_gat_score_grads(float *dU, const float *dEl, const float *dEr, const float *u, const float *own,
                        int64_t ow, const float *al, const float *ar, int64_t h, int64_t f, int64_t r0,
                        int64_t r1, float *part) {
  PICK3(score_grads, dU, dEl, dEr, u, own, ow, al, ar, h, f, r0, r1, part);
}

// pay_rows writes rows [r0, r1) of pay, [U_i | a_r·U_i] per head, and with
// el (NULL: not) el_i = a_l·U_i.
void sc_gat_pay_rows(float *pay, float *el, const float *u, const float *al, const float *ar, int64_t h,
                    int64_t f, int64_t r0, int64_t r1) {
  PICK3(pay_rows, pay, el, u, al, ar, h, f, r0, r1);
}

// sc_gat_starts_rows reports whether the attend of h heads of f starts a
// row's outputs (o, o2, c) at the row's first edges rather than reading
// them: the 88 kernels, whose outputs are the layer's largest arrays. GATStart
// then leaves those arrays as the last pass left them, and the attend asks
// for a row's lines a few rows ahead with intent to write, since its
// stores would otherwise meet them first among the gathers.
int sc_gat_starts_rows(int64_t h, int64_t f) { return h == 8 && f == 8; }

// sc_gat_clear_unstarted zeroes the outputs of the rows [r0, r1) no block
// started (m still −∞), where the attend starts a row's sums itself.
void sc_gat_clear_unstarted(const float *m, float *o, float *o2, float *c, int64_t h, int64_t f, int64_t r0,
                            int64_t r1) {
  for (int64_t i = r0; i < r1; i++)
    if (m[i * h] == -INFINITY) {
      memset(o + i * h * f, 0, sizeof(float) * h * f);
      if (o2) memset(o2 + i * h * f, 0, sizeof(float) * h * f);
      if (c) memset(c + i * h, 0, sizeof(float) * h);
    }
}

// outputs divides each head's output o by its sum s, in place, and writes
// z's rows (zc wide): the heads side by side (concat) or their mean.
void sc_gat_outputs(float *z, int64_t zc, float *o, const float *s, int64_t h, int64_t f, int concat,
                   int64_t r0, int64_t r1) {
  PICK3(outputs, z, zc, o, s, h, f, concat, r0, r1);
}

// gradient_rows writes rows [r0, r1) of gpay, [G | el | lse | δ] (lse = m + ln s,
// δ = G·o per head), from the output's gradient g (gc wide: the heads side
// by side, or their mean's), and the target side ∂el into dEl.
void sc_gat_gradient_rows(float *gpay, float *dEl, const float *g, int64_t gc, const float *el, const float *m,
                      const float *s, const float *o, const float *o2, const float *c, int64_t h, int64_t f,
                      int concat, int64_t r0, int64_t r1) {
  PICK3(gradient_rows, gpay, dEl, g, gc, el, m, s, o, o2, c, h, f, concat, r0, r1);
}

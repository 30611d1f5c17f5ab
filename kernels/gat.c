// GAT attention over one column block (src/train/gat.go has the math and
// the layout of the rows that travel). Each function works on a row range
// and writes only those rows, so the Go side splits rows over threads.
//
// A row's edges are taken a chunk at a time: the chunk's scores for every
// head are gathered into a small buffer, their exponentials taken on
// vectors (vexp_body.h), and only then are the rows of U or G read. The forward
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
// chunks, so that a chunk's rows have arrived before its scores are read.
// The neighbour side's scores' pass asks
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

// The kernels, once per level (gat_body.h, which includes the one-head
// kernels, gat_head_body.h).
#define SC_BODY "vexp_body.h"
#define SC_BODY2 "gat_body.h"
#include "levels.h"

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

// GAT attention over one column block (src/train/gat.go has the math and
// the layout of the rows that travel). Each function works on a row range
// and writes only those rows, so the Go side splits rows over threads.
// Attention dropout is keyed by the edge's original node ids:
// keep(target, source, head) draws sc_mix64(edge ^ head) with
// edge = sc_mix64(key ^ target ^ ... ), as wire.Seed and wire.SeedOf do.
#include <math.h>
#include "cpu.h"
#include "dropout_rng.h"

#define GOLDEN 0x9e3779b97f4a7c15ULL

static inline int64_t id_of(const int64_t *ids, int64_t row0, int64_t r) { return ids ? ids[r] : row0 + r; }

// edge_key is wire.Seed(key ^ target, source).
static inline uint64_t edge_key(uint64_t key, int64_t target, int64_t source) {
  return sc_mix64((key ^ (uint64_t)target) ^ sc_mix64((uint64_t)source + GOLDEN));
}

// drop_scale is the coefficient's dropout scale in head k: 1/keep kept, 0
// dropped; key 0 means no dropout.
static inline float drop_scale(uint64_t key, uint64_t edge, int64_t k, float keep) {
  if (key == 0) return 1.0f;
  const uint64_t h = sc_mix64(edge ^ (uint64_t)k);
  return (float)(h >> 40) * (1.0f / 16777216.0f) < 1.0f - keep ? 0.0f : 1.0f / keep;
}

static inline float leaky(float x, float *slope) {
  if (x < 0) {
    *slope = 0.2f;
    return 0.2f * x;
  }
  *slope = 1.0f;
  return x;
}

// coef is the coefficient α of score LeakyReLU(el + er) in a row whose
// softmax has maximum m and sum s; slope gets LeakyReLU's derivative there.
static inline float coef(float el, float er, float m, float s, float *slope) {
  return expf(leaky(el + er, slope) - m) / s;
}

static inline float dotf(const float *a, const float *b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

// attend folds a block's source rows (src: [U | er] per row) into the running
// softmax (m, s) and outputs o of target rows [r0, r1).
void sc_gat_attend(const int64_t *rowptr, const int32_t *col, const float *src, int64_t h, int64_t f,
                   const float *el, float *m, float *s, float *o, int64_t r0, int64_t r1, uint64_t key,
                   float keep, const int64_t *tids, int64_t trow0, const int64_t *sids, int64_t srow0) {
  const int64_t hf = h * f, w = hf + h;
  for (int64_t i = r0; i < r1; i++) {
    const int64_t target = id_of(tids, trow0, i);
    for (int64_t p = rowptr[i]; p < rowptr[i + 1]; p++) {
      const float *row = src + (int64_t)col[p] * w;
      const uint64_t edge = key ? edge_key(key, target, id_of(sids, srow0, col[p])) : 0;
      for (int64_t k = 0; k < h; k++) {
        float slope;
        const float x = leaky(el[i * h + k] + row[hf + k], &slope);
        float *oi = o + i * hf + k * f, *mi = m + i * h + k;
        if (x > *mi) {
          const float sc = expf(*mi - x);
          s[i * h + k] *= sc;
          for (int64_t t = 0; t < f; t++) oi[t] *= sc;
          *mi = x;
        }
        const float pr = expf(x - *mi);
        s[i * h + k] += pr; // the softmax counts dropped coefficients too
        const float d = drop_scale(key, edge, k, keep);
        if (d > 0) {
          const float a = pr * d, *u = row + k * f;
          for (int64_t t = 0; t < f; t++) oi[t] += a * u[t];
        }
      }
    }
  }
}

// target_side adds Σ_j ∂s_ij into dEl of target rows [r0, r1); gp holds
// their [G | el | m | s | δ] rows, src the block's [U | er] rows.
void sc_gat_target(const int64_t *rowptr, const int32_t *col, const float *src, int64_t h, int64_t f,
                   const float *gp, float *dEl, int64_t r0, int64_t r1, uint64_t key, float keep,
                   const int64_t *tids, int64_t trow0, const int64_t *sids, int64_t srow0) {
  const int64_t hf = h * f, w = hf + h, gw = hf + 4 * h;
  for (int64_t i = r0; i < r1; i++) {
    const int64_t target = id_of(tids, trow0, i);
    const float *gi = gp + i * gw;
    for (int64_t p = rowptr[i]; p < rowptr[i + 1]; p++) {
      const float *row = src + (int64_t)col[p] * w;
      const uint64_t edge = key ? edge_key(key, target, id_of(sids, srow0, col[p])) : 0;
      for (int64_t k = 0; k < h; k++) {
        float slope;
        const float a = coef(gi[hf + k], row[hf + k], gi[hf + h + k], gi[hf + 2 * h + k], &slope);
        const float d = drop_scale(key, edge, k, keep);
        const float gu = d > 0 ? d * dotf(gi + k * f, row + k * f, f) : 0.0f;
        dEl[i * h + k] += a * (gu - gi[hf + 3 * h + k]) * slope;
      }
    }
  }
}

// neighbour_side adds, for source rows r in [r0, r1) (own: their [U | er]
// as the targets used them), Σ_i d α G_i into dU and Σ_i ∂s_ir into dEr
// over the block's target rows (src: their [G | el | m | s | δ]).
void sc_gat_neighbour(const int64_t *rowptr, const int32_t *col, const float *src, int64_t h, int64_t f,
                      const float *own, float *dU, float *dEr, int64_t r0, int64_t r1, uint64_t key,
                      float keep, const int64_t *oids, int64_t orow0, const int64_t *tids, int64_t trow0) {
  const int64_t hf = h * f, w = hf + h, gw = hf + 4 * h;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t source = id_of(oids, orow0, r);
    const float *ur = own + r * w;
    for (int64_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
      const float *t = src + (int64_t)col[p] * gw;
      const uint64_t edge = key ? edge_key(key, id_of(tids, trow0, col[p]), source) : 0;
      for (int64_t k = 0; k < h; k++) {
        float slope;
        const float a = coef(t[hf + k], ur[hf + k], t[hf + h + k], t[hf + 2 * h + k], &slope);
        const float d = drop_scale(key, edge, k, keep);
        float gu = 0;
        if (d > 0) {
          const float *gt = t + k * f;
          float *du = dU + r * hf + k * f;
          const float da = d * a;
          for (int64_t q = 0; q < f; q++) du[q] += da * gt[q];
          gu = d * dotf(gt, ur + k * f, f);
        }
        dEr[r * h + k] += a * (gu - t[hf + 3 * h + k]) * slope;
      }
    }
  }
}

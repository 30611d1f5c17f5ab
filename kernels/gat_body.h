// GAT's attention kernels for one level, included by gat.c once per level
// after vexp_body.h (SC_SUFFIX, SC_TARGET: simd.h). gat.c describes the
// chunks, the rescale and the dropout's keys.

// x[0, n) = e^x in place (x ≤ 0); x holds whole vectors past n.
SC_TARGET static inline void SC_FN(exp_chunk)(float *x, int64_t n) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float) };
  for (int64_t i = n; i % L; i++) x[i] = 0;
  for (int64_t i = 0; i < n; i += L) *(vf *)(x + i) = SC_FN(vexp)(*(vf *)(x + i));
}

// d[k] = a[8k, 8k + 8)·b[8k, 8k + 8), k < 8: the products summed
// pairwise across the 8 rows at once (the horizontal adds of a
// transpose), not one row at a time.
SC_TARGET static INLINE void SC_FN(sum8)(float *d, const float *a, const float *b) {
  v8 p[8];
  for (int k = 0; k < 8; k++) p[k] = *(const v8 *)(a + 8 * k) * *(const v8 *)(b + 8 * k);
  const v8 u0 = HADD8(HADD8(p[0], p[1]), HADD8(p[2], p[3]));
  const v8 u1 = HADD8(HADD8(p[4], p[5]), HADD8(p[6], p[7]));
  *(v8 *)d = __builtin_shufflevector(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11) +
             __builtin_shufflevector(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15);
}

// fold_max takes a chunk's maxima cm into a row's running maxima mi:
// a larger one rescales what the row has summed (si, oi and, kept for
// a backward, ci and o2i) by e^(old − new).
SC_TARGET static INLINE void SC_FN(fold_max)(const float *cm, float *mi, float *si, float *oi,
    float *o2i, float *ci, int64_t h, int64_t f) {
  for (int64_t k = 0; k < h; k++)
    if (mi[k] == -INFINITY) // the row's first edges: nothing summed
      mi[k] = cm[k];
    else if (cm[k] > mi[k]) {
      const float sc = expf(mi[k] - cm[k]);
      si[k] *= sc;
      for (int64_t t = 0; t < f; t++) oi[k * f + t] *= sc;
      if (o2i) {
        ci[k] *= sc;
        for (int64_t t = 0; t < f; t++) o2i[k * f + t] *= sc;
      }
      mi[k] = cm[k];
    }
}

// 8 heads of 8 features, the usual hidden layer, on whole vectors: a
// row's outputs and sums stay in registers over its edges, the scores of
// an edge's heads are one v8, and the dropout draws of an edge are
// compared eight at once. Same arithmetic, in the same order, as the
// general bodies below, but for the rescale at a larger maximum: its
// exponentials are taken on a vector, as the scores' are. Their helpers
// first: leaky8 and max8 are leaky and the running maximum on a v8.
SC_TARGET static INLINE void SC_FN(leaky8)(v8 *x, v8 *slope, const v8 *vp) {
  const v8 v = *vp;
  const vi8 neg = v < 0;
  *slope = (v8)((neg & (vi8)(v8){S8(0.2f)}) | (~neg & (vi8)(v8){S8(1.0f)}));
  *x = (v8)((neg & (vi8)(0.2f * v)) | (~neg & (vi8)v));
}

SC_TARGET static INLINE void SC_FN(max8)(v8 *a, const v8 *b) {
  const vi8 gt = *b > *a;
  *a = (v8)((gt & (vi8)*b) | (~gt & (vi8)*a));
}

// the eight heads' scales of edge_scales at once
SC_TARGET static INLINE void SC_FN(scales8)(v8 *dsc, uint64_t edge, drop_of_t dr) {
  const uint64_t z[2] = {sc_mix64(edge), sc_mix64(edge ^ 1)};
  u16x8 d;
  memcpy(&d, z, sizeof d);
  uint32_t scale;
  memcpy(&scale, &dr.scale, sizeof scale);
  const vi8 kept = __builtin_convertvector(d, vi8) >= (int32_t)dr.thr;
  *dsc = (v8)(kept & (int32_t)scale);
}

// chunk_scales writes the dropout scales of one head on a row's edges
// [p0, p1) at d[p − p0]: edge_scales of edge_key on eight edges at once,
// in 64-bit lanes. The row is the target (fwd: the forward, edge p's
// source is col[p]'s id) or the source (the neighbour side, col[p]'s id
// the target). d holds eight edges past p1. The one-head kernels ask for
// it at every level; the 88 kernels ask for chunk_scales8 at AVX-512, and
// below it hash each edge as they go.
//
// edge_keys8 writes edge_key of a row's edges [q, q + 8) into e (past p1,
// its last edge's).
SC_TARGET static INLINE void SC_FN(edge_keys8)(u64x8 *e, const int32_t *col, int64_t q, int64_t p1,
    uint64_t key, int64_t row, int fwd, const int64_t *ids, int64_t row0) {
  // the row's part of the key: key ^ target, or mix(source + GOLDEN)
  const uint64_t part = fwd ? key ^ (uint64_t)row : sc_mix64((uint64_t)row + GOLDEN);
  u64x8 id;
  for (int j = 0; j < 8; j++) id[j] = (uint64_t)id_of(ids, row0, col[q + j < p1 ? q + j : p1 - 1]);
  *e = fwd ? mix64x8(part ^ mix64x8(id + GOLDEN)) : mix64x8((key ^ id) ^ part);
}

SC_TARGET static void SC_FN(chunk_scales)(const int32_t *col, int64_t p0, int64_t p1, uint64_t key,
    int64_t row, int fwd, const int64_t *ids, int64_t row0, drop_of_t dr, float *d) {
  uint32_t scale;
  memcpy(&scale, &dr.scale, sizeof scale);
  for (int64_t q = p0; q < p1; q += 8) {
    u64x8 e;
    SC_FN(edge_keys8)(&e, col, q, p1, key, row, fwd, ids, row0);
    const vi8 kept = __builtin_convertvector(mix64x8(e) & 0xffff, vi8) >= (int32_t)dr.thr;
    const v8 sc = (v8)(kept & (int32_t)scale);
    memcpy(d + (q - p0), &sc, sizeof sc);
  }
}

// chunk_scales8 is scales8 of edge_key on eight edges at once, for the
// 88 kernels where the level has 64-bit lanes to multiply in (AVX-512):
// edge p's eight scales at d[p − p0], the row and ids as chunk_scales'.
// Hashed an edge at a time, the draws take a large share of the
// forward's time once the rows are in cache.
SC_TARGET static void SC_FN(chunk_scales8)(const int32_t *col, int64_t p0, int64_t p1, uint64_t key,
    int64_t row, int fwd, const int64_t *ids, int64_t row0, drop_of_t dr, v8 *d) {
  typedef uint16_t u16x32 __attribute__((vector_size(64)));
  typedef uint16_t u16x16 __attribute__((vector_size(32)));
  int32_t scale;
  memcpy(&scale, &dr.scale, sizeof scale);
  for (int64_t q = p0; q < p1; q += 8) {
    u64x8 e;
    SC_FN(edge_keys8)(&e, col, q, p1, key, row, fwd, ids, row0);
    const u64x8 z0 = mix64x8(e), z1 = mix64x8(e ^ 1);
    // edge j's draws: z0[j]'s four 16-bit parts, then z1[j]'s
    const u64x8 zz[2] = {__builtin_shufflevector(z0, z1, 0, 8, 1, 9, 2, 10, 3, 11),
                         __builtin_shufflevector(z0, z1, 4, 12, 5, 13, 6, 14, 7, 15)};
    for (int hlf = 0; hlf < 2; hlf++) {
      const u16x32 w = (u16x32)zz[hlf];
      const u16x16 pair[2] = {__builtin_shufflevector(w, w, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
          __builtin_shufflevector(w, w, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31)};
      for (int t = 0; t < 2; t++) {
        const vi16 kept = __builtin_convertvector(pair[t], vi16) >= (int32_t)dr.thr;
        const vi16 sc = kept & scale;
        memcpy(d + (q - p0) + 4 * hlf + 2 * t, &sc, sizeof sc);
      }
    }
  }
}

SC_TARGET static void SC_FN(attend88)(const int64_t *rowptr, const int32_t *col, const float *src,
    const float *el, float *m, float *s, float *o, float *o2, float *c, int64_t r0, int64_t r1,
    uint64_t key, float keep, const int64_t *tids, int64_t trow0, const int64_t *sids,
    int64_t srow0) {
  typedef SC_FN(hv) hv;
  enum { H = 8, HF = 64, W = 72, PER = CHUNK / H, BW = sizeof(hv) / sizeof(float), NB = HF / BW,
         VHASH = sizeof(SC_VF) == 64 };
  const int64_t pend = rowptr[r1];
  const drop_of_t dr = drop_of(keep);
  v8 x[PER + 1], sl[PER], ds[PER + 8], dsc = {S8(1.0f)};
  for (int64_t i = r0; i < r1; i++) {
    const int64_t target = id_of(tids, trow0, i);
    if (i + PFO < r1) {
      for (int b = 0; b < HF; b += 16) __builtin_prefetch(o + (i + PFO) * HF + b, 1);
      if (o2) for (int b = 0; b < HF; b += 16) __builtin_prefetch(o2 + (i + PFO) * HF + b, 1);
    }
    const v8 eli = *(const v8 *)(el + i * H);
    float *mi = m + i * H, *si = s + i * H, *oi = o + i * HF;
    float *o2i = o2 ? o2 + i * HF : NULL, *ci = c ? c + i * H : NULL;
    for (int64_t p0 = rowptr[i]; p0 < rowptr[i + 1]; p0 += PER) {
      const int64_t p1 = p0 + PER < rowptr[i + 1] ? p0 + PER : rowptr[i + 1];
      v8 cm = {S8(-INFINITY)};
      for (int64_t p = p0; p < p1; p++) {
        if (p + PF < pend) prefetch_l2(src + (int64_t)col[p + PF] * W, W);
        const v8 v = eli + *(const v8 *)(src + (int64_t)col[p] * W + HF);
        SC_FN(leaky8)(&x[p - p0], &sl[p - p0], &v);
        SC_FN(max8)(&cm, &x[p - p0]);
      }
      if (key && VHASH) SC_FN(chunk_scales8)(col, p0, p1, key, target, 1, sids, srow0, dr, ds);
      // fold_max on vectors, the rescale applied as the sums are loaded:
      // a row met again (a later chunk or block) with a larger maximum
      const int fresh = mi[0] == -INFINITY; // O, O2, C as the last pass left them
      const v8 mold = *(const v8 *)mi;
      const vi8 up = cm > mold;
      const v8 mv = fresh ? cm : (v8)((up & (vi8)cm) | (~up & (vi8)mold));
      *(v8 *)mi = mv;
      for (int64_t p = p0; p < p1; p++) x[p - p0] -= mv;
      SC_FN(exp_chunk)((float *)x, (p1 - p0) * H);
      hv O[NB] = {{0}}, O2[NB] = {{0}};
      v8 S = *(const v8 *)si, C = {0};
      if (!fresh) {
        v8 sc[2] = {mold - mv, {0}};
        SC_FN(exp_chunk)((float *)sc, H);
        sc[0] = (v8)((up & (vi8)sc[0]) | (~up & (vi8)(v8){S8(1.0f)}));
        S *= sc[0];
        for (int b = 0; b < NB; b++) O[b] = *(const hv *)(oi + BW * b) * SC_FN(spread)(sc[0], b);
        if (o2i) {
          C = *(const v8 *)ci * sc[0];
          for (int b = 0; b < NB; b++) O2[b] = *(const hv *)(o2i + BW * b) * SC_FN(spread)(sc[0], b);
        }
      }
      for (int64_t p = p0; p < p1; p++) {
        const float *row = src + (int64_t)col[p] * W;
        if (p + PF88 < pend) prefetch_l2(src + (int64_t)col[p + PF88] * W, W);
        const v8 xp = x[p - p0];
        if (key && VHASH) dsc = ds[p - p0];
        else if (key) SC_FN(scales8)(&dsc, edge_key(key, target, id_of(sids, srow0, col[p])), dr);
        S += xp; // dropped coefficients count here; they add 0 below
        const v8 av = xp * dsc;
        if (o2i) {
          const v8 bv = av * sl[p - p0];
          C += xp * sl[p - p0];
          for (int b = 0; b < NB; b++) {
            const hv rb = *(const hv *)(row + BW * b);
            O[b] += SC_FN(spread)(av, b) * rb;
            O2[b] += SC_FN(spread)(bv, b) * rb;
          }
        } else {
          for (int b = 0; b < NB; b++)
            O[b] += SC_FN(spread)(av, b) * *(const hv *)(row + BW * b);
        }
      }
      *(v8 *)si = S;
      for (int b = 0; b < NB; b++) *(hv *)(oi + BW * b) = O[b];
      if (o2i) {
        *(v8 *)ci = C;
        for (int b = 0; b < NB; b++) *(hv *)(o2i + BW * b) = O2[b];
      }
    }
  }
}

SC_TARGET static void SC_FN(neighbour88)(const int64_t *rowptr, const int32_t *col, const float *src,
    const float *own, float *dU, float *dEr, int64_t r0, int64_t r1, uint64_t key, float keep,
    const int64_t *oids, int64_t orow0, const int64_t *tids, int64_t trow0) {
  typedef SC_FN(hv) hv;
  enum { H = 8, HF = 64, W = 72, GW = 88, PER = CHUNK / H, BW = sizeof(hv) / sizeof(float), NB = HF / BW,
         VHASH = sizeof(SC_VF) == 64 };
  const int64_t pend = rowptr[r1];
  const drop_of_t dr = drop_of(keep);
  v8 x[PER + 1], sl[PER], ds[PER + 8], dsc = {S8(1.0f)};
  for (int64_t r = r0; r < r1; r++) {
    const int64_t source = id_of(oids, orow0, r);
    if (r + PFO < r1)
      for (int b = 0; b < HF; b += 16) __builtin_prefetch(dU + (r + PFO) * HF + b, 1);
    const float *ur = own + r * W;
    const v8 err = *(const v8 *)(ur + HF);
    float *du = dU + r * HF;
    hv DU[NB], GS[NB] = {{0}};
    v8 acc = {0};
    for (int b = 0; b < NB; b++) DU[b] = *(const hv *)(du + BW * b);
    for (int64_t p0 = rowptr[r]; p0 < rowptr[r + 1]; p0 += PER) {
      const int64_t p1 = p0 + PER < rowptr[r + 1] ? p0 + PER : rowptr[r + 1];
      for (int64_t p = p0; p < p1; p++) {
        const float *t = src + (int64_t)col[p] * GW + HF; // el | lse | δ
        // α = e^(score − lse)
        const v8 v = *(const v8 *)t + err;
        SC_FN(leaky8)(&x[p - p0], &sl[p - p0], &v);
        x[p - p0] -= *(const v8 *)(t + H);
      }
      if (key && VHASH) SC_FN(chunk_scales8)(col, p0, p1, key, source, 0, tids, trow0, dr, ds);
      SC_FN(exp_chunk)((float *)x, (p1 - p0) * H);
      for (int64_t p = p0; p < p1; p++) {
        const float *g = src + (int64_t)col[p] * GW;
        if (p + PF88 < pend) prefetch_l2(src + (int64_t)col[p + PF88] * GW, GW);
        if (key && VHASH) dsc = ds[p - p0];
        else if (key) SC_FN(scales8)(&dsc, edge_key(key, id_of(tids, trow0, col[p]), source), dr);
        const v8 xp = x[p - p0], da = dsc * xp, ws = da * sl[p - p0];
        for (int b = 0; b < NB; b++) {
          const hv gb = *(const hv *)(g + BW * b);
          DU[b] += SC_FN(spread)(da, b) * gb;
          GS[b] += SC_FN(spread)(ws, b) * gb;
        }
        acc -= xp * *(const v8 *)(g + HF + 2 * H) * sl[p - p0];
      }
    }
    // Σ_p w_p·(G_p·U_r) per head, as (Σ_p w_p·G_p)·U_r: one dot product
    // a row, not one an edge
    v8 gu;
    SC_FN(sum8)((float *)&gu, (const float *)GS, ur);
    for (int b = 0; b < NB; b++) *(hv *)(du + BW * b) = DU[b];
    *(v8 *)(dEr + r * H) += acc + gu;
  }
}

SC_TARGET static inline float SC_FN(hsum)(SC_VF v) {
  float s = 0;
  for (int l = 0; l < (int)(sizeof(v) / sizeof(float)); l++) s += v[l];
  return s;
}

// o[kf, kf + f) += a[k]·u[kf, kf + f) for each head k: a head's f
// features as whole vectors (the level's, else xmm) where f allows.
SC_TARGET static inline void SC_FN(heads_axpy)(float *restrict o, const float *restrict u,
    const float *restrict a, int64_t h, int64_t f) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float) };
  if (f % L == 0) {
    for (int64_t k = 0; k < h; k++)
      for (int64_t t = k * f; t < (k + 1) * f; t += L)
        *(vf *)(o + t) += a[k] * *(const vf *)(u + t);
  } else if (f % 4 == 0) {
    for (int64_t k = 0; k < h; k++)
      for (int64_t t = k * f; t < (k + 1) * f; t += 4)
        *(vf_base *)(o + t) += a[k] * *(const vf_base *)(u + t);
  } else {
    for (int64_t k = 0; k < h; k++)
      for (int64_t t = k * f; t < (k + 1) * f; t++) o[t] += a[k] * u[t];
  }
}

// d[k] = a[kf, kf + f)·b[kf, kf + f) for each head k.
SC_TARGET static inline void SC_FN(heads_dot)(float *restrict d, const float *restrict a,
    const float *restrict b, int64_t h, int64_t f) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float) };
  if (h == 8 && f == 8) {
    SC_FN(sum8)(d, a, b);
    return;
  }
  if (f % L == 0) {
    for (int64_t k = 0; k < h; k++) {
      vf s = *(const vf *)(a + k * f) * *(const vf *)(b + k * f);
      for (int64_t t = k * f + L; t < (k + 1) * f; t += L)
        s += *(const vf *)(a + t) * *(const vf *)(b + t);
      d[k] = SC_FN(hsum)(s);
    }
    return;
  }
  for (int64_t k = 0; k < h; k++) {
    float s = 0;
    for (int64_t t = k * f; t < (k + 1) * f; t++) s += a[t] * b[t];
    d[k] = s;
  }
}

// The one-head kernels, attend1_NV and neighbour1_NV.
#define SC_NV 1
#include "gat_head_body.h"
#undef SC_NV
#define SC_NV 2
#include "gat_head_body.h"
#undef SC_NV
#define SC_NV 4
#include "gat_head_body.h"
#undef SC_NV

// The general bodies, for any h and f.
SC_TARGET INLINE static void SC_FN(attend_body)(const int64_t *rowptr, const int32_t *col, const float *src,
    int64_t h, int64_t f, const float *el, float *m, float *s, float *o, float *o2, float *c,
    int64_t r0, int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0,
    const int64_t *sids, int64_t srow0) {
  const int64_t hf = h * f, w = hf + h, per = per_chunk(h), pend = rowptr[r1];
  const drop_of_t dr = drop_of(keep);
  float dsc[h];
  no_dropout(h, dsc);
  float x[per * h + 16], sl[per * h], cm[h], av[h], bv[h];
  for (int64_t i = r0; i < r1; i++) {
    const int64_t target = id_of(tids, trow0, i);
    const float *eli = el + i * h;
    float *mi = m + i * h, *si = s + i * h, *oi = o + i * hf;
    float *o2i = o2 ? o2 + i * hf : NULL, *ci = c ? c + i * h : NULL;
    for (int64_t p0 = rowptr[i]; p0 < rowptr[i + 1]; p0 += per) {
      const int64_t p1 = p0 + per < rowptr[i + 1] ? p0 + per : rowptr[i + 1];
      for (int64_t k = 0; k < h; k++) cm[k] = -INFINITY;
      for (int64_t p = p0; p < p1; p++) {
        if (p + PF < pend) prefetch(src + (int64_t)col[p + PF] * w, w);
        const float *er = src + (int64_t)col[p] * w + hf;
        float *xp = x + (p - p0) * h, *slp = sl + (p - p0) * h;
        for (int64_t k = 0; k < h; k++) {
          const float v = eli[k] + er[k];
          xp[k] = leaky(v), slp[k] = leaky_slope(v);
          cm[k] = xp[k] > cm[k] ? xp[k] : cm[k];
        }
      }
      SC_FN(fold_max)(cm, mi, si, oi, o2i, ci, h, f);
      for (int64_t p = p0; p < p1; p++)
        for (int64_t k = 0; k < h; k++) x[(p - p0) * h + k] -= mi[k];
      SC_FN(exp_chunk)(x, (p1 - p0) * h);
      for (int64_t p = p0; p < p1; p++) {
        const float *row = src + (int64_t)col[p] * w, *xp = x + (p - p0) * h;
        if (p + PF2 < pend) prefetch(src + (int64_t)col[p + PF2] * w, w);
        const float *slp = sl + (p - p0) * h;
        if (key) edge_scales(edge_key(key, target, id_of(sids, srow0, col[p])), h, dr, dsc);
        for (int64_t k = 0; k < h; k++) {
          si[k] += xp[k]; // dropped coefficients count here; they add 0 below
          av[k] = xp[k] * dsc[k];
        }
        SC_FN(heads_axpy)(oi, row, av, h, f);
        if (o2i) {
          for (int64_t k = 0; k < h; k++) {
            bv[k] = av[k] * slp[k];
            ci[k] += xp[k] * slp[k];
          }
          SC_FN(heads_axpy)(o2i, row, bv, h, f);
        }
      }
    }
  }
}

SC_TARGET INLINE static void SC_FN(neighbour_body)(const int64_t *rowptr, const int32_t *col,
    const float *src, int64_t h, int64_t f, const float *own, float *dU, float *dEr, int64_t r0,
    int64_t r1, uint64_t key, float keep, const int64_t *oids, int64_t orow0,
    const int64_t *tids, int64_t trow0) {
  const int64_t hf = h * f, w = hf + h, gw = hf + 3 * h, per = per_chunk(h), pend = rowptr[r1];
  const drop_of_t dr = drop_of(keep);
  float dsc[h];
  no_dropout(h, dsc);
  float x[per * h + 16], sl[per * h], acc[h], da[h], gu[h];
  for (int64_t r = r0; r < r1; r++) {
    const int64_t source = id_of(oids, orow0, r);
    const float *ur = own + r * w, *err = ur + hf;
    float *du = dU + r * hf;
    for (int64_t k = 0; k < h; k++) acc[k] = 0;
    for (int64_t p0 = rowptr[r]; p0 < rowptr[r + 1]; p0 += per) {
      const int64_t p1 = p0 + per < rowptr[r + 1] ? p0 + per : rowptr[r + 1];
      for (int64_t p = p0; p < p1; p++) {
        if (p + PF < pend) prefetch(src + (int64_t)col[p + PF] * gw, gw);
        const float *t = src + (int64_t)col[p] * gw + hf; // el | lse | δ
        for (int64_t k = 0; k < h; k++) {
          const float v = t[k] + err[k];
          x[(p - p0) * h + k] = leaky(v) - t[h + k]; // α = e^(score − lse)
          sl[(p - p0) * h + k] = leaky_slope(v);
        }
      }
      SC_FN(exp_chunk)(x, (p1 - p0) * h);
      for (int64_t p = p0; p < p1; p++) {
        const float *g = src + (int64_t)col[p] * gw, *t = g + hf;
        if (p + PF2 < pend) prefetch(src + (int64_t)col[p + PF2] * gw, gw);
        if (key) edge_scales(edge_key(key, id_of(tids, trow0, col[p]), source), h, dr, dsc);
        const float *xp = x + (p - p0) * h, *slp = sl + (p - p0) * h;
        for (int64_t k = 0; k < h; k++) da[k] = dsc[k] * xp[k];
        SC_FN(heads_axpy)(du, g, da, h, f);
        SC_FN(heads_dot)(gu, g, ur, h, f);
        for (int64_t k = 0; k < h; k++)
          acc[k] += xp[k] * (dsc[k] * gu[k] - t[2 * h + k]) * slp[k];
      }
    }
    for (int64_t k = 0; k < h; k++) dEr[r * h + k] += acc[k];
  }
}

// The bodies above compiled for the usual shapes, where h and f are
// constants: the head loops unroll into whole vectors.
SC_TARGET static void SC_FN(attend)(const int64_t *rowptr, const int32_t *col, const float *src,
    int64_t h, int64_t f, const float *el, float *m, float *s, float *o, float *o2, float *c,
    int64_t r0, int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0,
    const int64_t *sids, int64_t srow0) {
  if (h == 8 && f == 8) {
    SC_FN(attend88)(rowptr, col, src, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0);
    return;
  }
  if (h == 1 && f % (int64_t)(sizeof(SC_VF) / sizeof(float)) == 0) {
    switch (f / (int64_t)(sizeof(SC_VF) / sizeof(float))) {
    case 1: SC_FN(attend1_1)(rowptr, col, src, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0); return;
    case 2: SC_FN(attend1_2)(rowptr, col, src, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0); return;
    case 4: SC_FN(attend1_4)(rowptr, col, src, el, m, s, o, o2, c, r0, r1, key, keep, tids, trow0, sids, srow0); return;
    }
  }
  SHAPES(h, f, SC_FN(attend_body)(rowptr, col, src, H_, F_, el, m, s, o, o2, c, r0, r1, key,
      keep, tids, trow0, sids, srow0));
}

SC_TARGET static void SC_FN(neighbour)(const int64_t *rowptr, const int32_t *col,
    const float *src, int64_t h, int64_t f, const float *own, float *dU, float *dEr, int64_t r0,
    int64_t r1, uint64_t key, float keep, const int64_t *oids, int64_t orow0,
    const int64_t *tids, int64_t trow0) {
  if (h == 8 && f == 8) {
    SC_FN(neighbour88)(rowptr, col, src, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0);
    return;
  }
  if (h == 1 && f % (int64_t)(sizeof(SC_VF) / sizeof(float)) == 0) {
    switch (f / (int64_t)(sizeof(SC_VF) / sizeof(float))) {
    case 1: SC_FN(neighbour1_1)(rowptr, col, src, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0); return;
    case 2: SC_FN(neighbour1_2)(rowptr, col, src, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0); return;
    case 4: SC_FN(neighbour1_4)(rowptr, col, src, own, dU, dEr, r0, r1, key, keep, oids, orow0, tids, trow0); return;
    }
  }
  SHAPES(h, f, SC_FN(neighbour_body)(rowptr, col, src, H_, F_, own, dU, dEr, r0, r1, key,
      keep, oids, orow0, tids, trow0));
}

SC_TARGET static void SC_FN(pay_rows)(float *pay, float *el, const float *u, const float *al,
    const float *ar, int64_t h, int64_t f, int64_t r0, int64_t r1) {
  const int64_t hf = h * f, w = hf + h;
  for (int64_t i = r0; i < r1; i++) {
    const float *ui = u + i * hf;
    float *pi = pay + i * w;
    for (int64_t x = 0; x < hf; x++) pi[x] = ui[x];
    SC_FN(heads_dot)(pi + hf, ui, ar, h, f);
    if (el) SC_FN(heads_dot)(el + i * h, ui, al, h, f);
  }
}

SC_TARGET static void SC_FN(outputs)(float *z, int64_t zc, float *o, const float *s, int64_t h,
    int64_t f, int concat, int64_t r0, int64_t r1) {
  const int64_t hf = h * f;
  for (int64_t i = r0; i < r1; i++) {
    float *oi = o + i * hf, *zi = z + i * zc;
    for (int64_t k = 0; k < h; k++) {
      const float sk = s[i * h + k];
      if (sk > 0)
        for (int64_t t = k * f; t < (k + 1) * f; t++) oi[t] *= 1.0f / sk;
    }
    if (concat) {
      for (int64_t x = 0; x < hf; x++) zi[x] = oi[x];
      continue;
    }
    for (int64_t t = 0; t < f; t++) zi[t] = 0;
    for (int64_t k = 0; k < h; k++)
      for (int64_t t = 0; t < f; t++) zi[t] += oi[k * f + t];
    const float inv = 1.0f / (float)h;
    for (int64_t t = 0; t < f; t++) zi[t] *= inv;
  }
}

SC_TARGET static void SC_FN(gradient_rows)(float *gpay, float *dEl, const float *g, int64_t gc,
    const float *el, const float *m, const float *s, const float *o, const float *o2,
    const float *c, int64_t h, int64_t f, int concat, int64_t r0, int64_t r1) {
  const int64_t hf = h * f, gw = hf + 3 * h;
  const float inv = 1.0f / (float)h;
  float delta[h], d2[h];
  for (int64_t i = r0; i < r1; i++) {
    float *row = gpay + i * gw;
    const float *gi = g + i * gc;
    if (concat)
      for (int64_t x = 0; x < hf; x++) row[x] = gi[x];
    else // the mean's share of each head
      for (int64_t k = 0; k < h; k++)
        for (int64_t t = 0; t < f; t++) row[k * f + t] = gi[t] * inv;
    SC_FN(heads_dot)(delta, row, o + i * hf, h, f);
    SC_FN(heads_dot)(d2, row, o2 + i * hf, h, f);
    for (int64_t k = 0; k < h; k++) {
      const int64_t ik = i * h + k;
      const float sk = s[ik];
      // a row without neighbours is no one's target
      row[hf + k] = el[ik], row[hf + h + k] = sk > 0 ? m[ik] + logf(sk) : -INFINITY;
      row[hf + 2 * h + k] = delta[k];
      dEl[ik] = sk > 0 ? (d2[k] - delta[k] * c[ik]) / sk : 0; // the target side
    }
  }
}

SC_TARGET static void SC_FN(score_grads)(float *dU, const float *dEl, const float *dEr,
    const float *u, const float *own, int64_t ow, const float *al, const float *ar,
    int64_t h, int64_t f, int64_t r0, int64_t r1, float *part) {
  const int64_t hf = h * f;
  float *dal = part, *dar = part + hf;
  for (int64_t x = 0; x < 2 * hf; x++) part[x] = 0;
  for (int64_t i = r0; i < r1; i++) {
    const float *gl = dEl + i * h, *gr = dEr + i * h;
    SC_FN(heads_axpy)(dU + i * hf, al, gl, h, f);
    SC_FN(heads_axpy)(dU + i * hf, ar, gr, h, f);
    SC_FN(heads_axpy)(dal, u + i * hf, gl, h, f);
    SC_FN(heads_axpy)(dar, own + i * ow, gr, h, f);
  }
}

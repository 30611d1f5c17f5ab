// One SpMM kernel for one level, included by cpu.c with, besides SC_SUFFIX
// and SC_TARGET (simd.h):
//   SC_SPMM       the kernel's name: spmm (the product) or gather (the
//                 gathers alone, the kernel benchmark's)
//   SC_WEIGHT(p)  nonzero p's weight, written before its row: val[p] * for
//                 the product, nothing for the gathers
//   SC_NVMAX      the widest tile spmm takes, in vectors of VW floats
//
// SPMM_PART(part) names this kernel's part: spmm_tile1_avx2 for tile1.
#define SPMM_PART(part) SC_FN(SC_CAT(SC_SPMM, SC_CAT(_, part)))

#define SC_NV 1
#include "spmm_tile_body.h"
#undef SC_NV
#define SC_NV 2
#include "spmm_tile_body.h"
#undef SC_NV
#define SC_NV 4
#include "spmm_tile_body.h"
#undef SC_NV

// spmm_pair: rows c and d of C = (or +=) their nonzeros' sums over a B one
// vector wide and small enough for L1 (X·W, features by a weight): no
// prefetches, and two rows' chains in step, since one chain of FMAs waits
// on each before it. Each row keeps its own order, so it sums as the tile.
SC_TARGET static inline void SPMM_PART(pair)(const int32_t *restrict col,
    const float *restrict val, int64_t p, int64_t pe, int64_t q, int64_t qe,
    const float *restrict B, float *restrict c, float *restrict d, int acc_in) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float), NW = VW / L };
  vf s[NW], t[NW];
  for (int v = 0; v < NW; v++) {
    s[v] = acc_in ? *(const vf *)(c + v * L) : (vf){0};
    t[v] = acc_in ? *(const vf *)(d + v * L) : (vf){0};
  }
  for (; p < pe && q < qe; p++, q++) {
    const float *b = B + (int64_t)col[p] * VW, *e = B + (int64_t)col[q] * VW;
    for (int v = 0; v < NW; v++) {
      s[v] += SC_WEIGHT(p) *(const vf *)(b + v * L);
      t[v] += SC_WEIGHT(q) *(const vf *)(e + v * L);
    }
  }
  for (; p < pe; p++)
    for (int v = 0; v < NW; v++) s[v] += SC_WEIGHT(p) *(const vf *)(B + (int64_t)col[p] * VW + v * L);
  for (; q < qe; q++)
    for (int v = 0; v < NW; v++) t[v] += SC_WEIGHT(q) *(const vf *)(B + (int64_t)col[q] * VW + v * L);
  for (int v = 0; v < NW; v++) {
    *(vf *)(c + v * L) = s[v];
    *(vf *)(d + v * L) = t[v];
  }
}

// spmm_row: one row c of C = (or +=) its nonzeros [p0, p1) times B, n
// wide: tiles of up to SC_NVMAX vectors per pass over the nonzeros, the
// leftover columns (n % VW) plain.
SC_TARGET static inline void SPMM_PART(row)(const int32_t *col, const float *val, int64_t p0,
                                            int64_t p1, int64_t pf_end, const float *B, int64_t n,
                                            float *c, int acc_in) {
  const int64_t nv = n / VW * VW;
  int64_t t = 0;
  if (SC_NVMAX >= 4)
    for (; t + 4 * VW <= nv; t += 4 * VW) SPMM_PART(tile4)(col, val, p0, p1, pf_end, B, n, t, c, acc_in);
  if (SC_NVMAX >= 2)
    for (; t + 2 * VW <= nv; t += 2 * VW) SPMM_PART(tile2)(col, val, p0, p1, pf_end, B, n, t, c, acc_in);
  for (; t < nv; t += VW) SPMM_PART(tile1)(col, val, p0, p1, pf_end, B, n, t, c, acc_in);
  for (; t < n; t++) {
    float s = acc_in ? c[t] : 0.0f;
    for (int64_t p = p0; p < p1; p++) s += SC_WEIGHT(p) B[(int64_t)col[p] * n + t];
    c[t] = s;
  }
}

// spmm: rows [r0, r1) of C = (or +=) A·B, or rows list[r0..r1), B n wide:
// tiles of up to SC_NVMAX vectors per pass over a row's nonzeros, leftover
// columns (n % 16) plain. With compact, rowptr is indexed by list position
// (spmm_arow): the listed rows' pointers alone, read in order.
SC_TARGET static void SC_FN(SC_SPMM)(const int64_t *rowptr, const int32_t *col, const float *val,
                                     const float *B, int64_t kb, float *C, int64_t n, int64_t r0,
                                     int64_t r1, int acc_in, const int32_t *list, int compact) {
  if (r1 <= r0) return;
  if (n == VW && kb * VW * (int64_t)sizeof(float) <= NARROW_B) {
    int64_t i = r0;
    for (; i + 1 < r1; i += 2) {
      const int64_t r = list ? list[i] : i, q = list ? list[i + 1] : i + 1;
      const int64_t a = spmm_arow(i, r, compact), b = spmm_arow(i + 1, q, compact);
      SPMM_PART(pair)(col, val, rowptr[a], rowptr[a + 1], rowptr[b], rowptr[b + 1], B,
                      C + r * VW, C + q * VW, acc_in);
    }
    if (i < r1) {
      const int64_t r = list ? list[i] : i, a = spmm_arow(i, r, compact);
      SPMM_PART(tile1)(col, val, rowptr[a], rowptr[a + 1], rowptr[a + 1], B, VW, 0, C + r * VW, acc_in);
    }
    return;
  }
  // Prefetches run ahead over the nonzeros up to the last row's end: with
  // an ascending list past empty rows, the next listed rows'.
  const int64_t pf_end = rowptr[spmm_arow(r1 - 1, list ? list[r1 - 1] : r1 - 1, compact) + 1];
  // One row of B per vector tile (the hidden width 16): the row stride a
  // constant, so no multiply per gathered row.
  if (n == VW) {
    for (int64_t i = r0; i < r1; i++) {
      const int64_t r = list ? list[i] : i, a = spmm_arow(i, r, compact);
      SPMM_PART(tile1)(col, val, rowptr[a], rowptr[a + 1], pf_end, B, VW, 0, C + r * VW, acc_in);
    }
    return;
  }
  for (int64_t i = r0; i < r1; i++) {
    const int64_t r = list ? list[i] : i, a = spmm_arow(i, r, compact);
    SPMM_PART(row)(col, val, rowptr[a], rowptr[a + 1], pf_end, B, n, C + r * n, acc_in);
  }
}

#ifdef SC_SPMM_COLS
// spmm_cols: spmm with B holding one range of its rows, [lo, hi), and each
// row's nonzeros taken from cur[i] (the row's first, with first) up to the
// first whose column is hi or more, where cur[i] is left for the next
// range. Over successive ranges (acc_in after the first) each row of C
// sums its nonzeros in their order, as one spmm over all of B does, where
// a row's columns ascend: the same values, bit for bit, from a buffer of a
// range's rows. A row with nothing in the range is left as it is.
SC_TARGET static void SC_FN(spmm_cols)(const int64_t *rowptr, const int32_t *col, const float *val,
                                       const float *B, int64_t lo, int64_t hi, float *C, int64_t n,
                                       int64_t r0, int64_t r1, int acc_in, const int32_t *list,
                                       int compact, int64_t *cur, int first) {
  // Rows of B are found by their columns, counted from lo.
  const float *Bz = (const float *)((uintptr_t)B - (uintptr_t)(lo * n) * sizeof(float));
  for (int64_t i = r0; i < r1; i++) {
    const int64_t r = list ? list[i] : i, a = spmm_arow(i, r, compact);
    const int64_t p0 = first ? rowptr[a] : cur[i], pe = rowptr[a + 1];
    int64_t p1 = p0;
    while (p1 < pe && col[p1] < hi) p1++;
    cur[i] = p1;
    if (p1 == p0 && acc_in) continue;
    SPMM_PART(row)(col, val, p0, p1, p1, Bz, n, C + r * n, acc_in);
  }
}
#endif

#undef SPMM_PART

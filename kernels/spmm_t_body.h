// spmm_t for one level, included by cpu.c once per level (SC_SUFFIX,
// SC_TARGET: simd.h).
//
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
SC_TARGET static void SC_FN(spmm_t)(const int64_t *rowptr, const int32_t *col, const float *val,
                                    const float *restrict B, float *restrict C, int64_t m, int64_t n,
                                    int64_t r0, int64_t r1) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float) };
  memset(C, 0, (size_t)(m * n) * sizeof(float));
  if (n % L == 0) switch (n / L) {
    case 1: SPMM_T_HELD(1); return;
    case 2: SPMM_T_HELD(2); return;
    case 4: SPMM_T_HELD(4); return;
    }
  const int64_t nv = n / L * L;
  for (int64_t i = r0; i < r1; i++) {
    const float *b = B + i * n;
    for (int64_t p = rowptr[i]; p < rowptr[i + 1]; p++) {
      float *c = C + (int64_t)col[p] * n;
      const float v = val[p];
      int64_t j = 0;
      for (; j < nv; j += L) *(vf *)(c + j) += v * *(const vf *)(b + j);
      for (; j < n; j++) c[j] += v * b[j];
    }
  }
}
#undef SPMM_T_HELD

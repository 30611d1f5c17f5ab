// One register tile for one level, included by gemm_body.h once for each
// SC_TILE_MR (the tile's rows).
//
// tileMR: c (MR rows of ldc, one vector wide) = or += Σ_{t<cnt} a[i·ai +
// t·as] · b[t·bs], prefetching a line per step with pf.
SC_TARGET static inline void SC_FN(SC_CAT(tile, SC_TILE_MR))(const float *restrict a, int64_t ai,
    int64_t as, const float *restrict b, int64_t bs, int64_t cnt, float *restrict c, int64_t ldc,
    int acc, sc_pf *pf) {
  typedef SC_VF vf;
  enum { NV = NVEC, L = VW / NVEC };
  vf s[SC_TILE_MR][NV];
  for (int i = 0; i < SC_TILE_MR; i++)
    for (int v = 0; v < NV; v++) s[i][v] = acc ? *(const vf *)(c + i * ldc + v * L) : (vf){0};
  sc_pf q = pf ? *pf : (sc_pf){0};
  for (int64_t t = 0; t < cnt; t++) {
    pf_next(&q);
    vf bv[NV];
    for (int v = 0; v < NV; v++) bv[v] = *(const vf *)(b + t * bs + v * L);
    for (int i = 0; i < SC_TILE_MR; i++) {
      const float x = a[i * ai + t * as];
      for (int v = 0; v < NV; v++) s[i][v] += x * bv[v];
    }
  }
  if (pf) *pf = q;
  for (int i = 0; i < SC_TILE_MR; i++)
    for (int v = 0; v < NV; v++) *(vf *)(c + i * ldc + v * L) = s[i][v];
}

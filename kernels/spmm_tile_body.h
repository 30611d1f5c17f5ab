// spmm_tile for one level and tile width, included by spmm_body.h once for
// each SC_NV (the tile's vectors of VW floats: 1, 2 or 4).
//
// spmm_tile: c[t .. t+NV·16) of one row = (or +=) Σ_p val[p]·B[col[p]], in
// the order of the row's nonzeros (one FMA chain per vector), with rows of B
// prefetched PF_DIST nonzeros ahead for each vector of the tile: they are
// gathered at random, so several cache misses must be outstanding at once,
// and a wider tile spends longer on a nonzero, so its requests must leave
// earlier. More chains were slower. The prefetches fill L2, not L1
// (prefetcht1): into L1 they held its few miss buffers. Only in the rows
// within that distance of pf_end is a prefetch's index clamped to the
// nonzeros that exist: a clamp at every nonzero costs at narrow widths.
SC_TARGET static inline void SPMM_PART(SC_CAT(tile, SC_NV))(const int32_t *restrict col,
    const float *restrict val, int64_t p0, int64_t p1, int64_t pf_end, const float *restrict B,
    int64_t n, int64_t t, float *restrict c, int acc_in) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float), NW = SC_NV * VW / L };
  vf s[NW];
  for (int v = 0; v < NW; v++) s[v] = acc_in ? *(const vf *)(c + t + v * L) : (vf){0};
  enum { PFD = PF_DIST * SC_NV };
  const int clamp = p1 + PFD > pf_end;
  for (int64_t p = p0; p < p1; p++) {
    const int64_t q = !clamp || p + PFD < pf_end ? p + PFD : p;
    for (int v = 0; v < SC_NV; v++) __builtin_prefetch(B + (int64_t)col[q] * n + t + v * VW, 0, 2);
    const float *b = B + (int64_t)col[p] * n + t;
    for (int v = 0; v < NW; v++) s[v] += SC_WEIGHT(p) * (const vf *)(b + v * L);
  }
  for (int v = 0; v < NW; v++) *(vf *)(c + t + v * L) = s[v];
}

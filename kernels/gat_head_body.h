// GAT's one-head kernels for one level, included by gat_body.h once for
// each SC_NV: one head of F = NV·L features (an output layer), NV the
// level's vectors (1, 2 or 4).
//
// They work on whole vectors as the 88 kernels do: a row's outputs and sums
// stay in registers over its edges. The forward's arithmetic is the
// general body's, in its order. The neighbour side sums Σ_p w_p·(G_p·U_r)
// as (Σ_p w_p·G_p)·U_r, one dot product a row where the general body takes
// one an edge.
SC_TARGET static void SC_FN(SC_CAT(attend1_, SC_NV))(const int64_t *rowptr, const int32_t *col,
    const float *src, const float *el, float *m, float *s, float *o, float *o2, float *c,
    int64_t r0, int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0,
    const int64_t *sids, int64_t srow0) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float), F = SC_NV * L, W = F + 1, PER = CHUNK };
  const int64_t pend = rowptr[r1];
  const drop_of_t dr = drop_of(keep);
  float x[PER + 16], sl[PER], ds[PER + 8], dsc = 1.0f;
  for (int64_t i = r0; i < r1; i++) {
    const int64_t target = id_of(tids, trow0, i);
    const float eli = el[i];
    float *oi = o + i * F, *o2i = o2 ? o2 + i * F : NULL;
    for (int64_t p0 = rowptr[i]; p0 < rowptr[i + 1]; p0 += PER) {
      const int64_t p1 = p0 + PER < rowptr[i + 1] ? p0 + PER : rowptr[i + 1];
      float cm = -INFINITY;
      for (int64_t p = p0; p < p1; p++) {
        if (p + PF < pend) prefetch(src + (int64_t)col[p + PF] * W, W);
        const float v = eli + src[(int64_t)col[p] * W + F];
        x[p - p0] = leaky(v), sl[p - p0] = leaky_slope(v);
        cm = x[p - p0] > cm ? x[p - p0] : cm;
      }
      SC_FN(fold_max)(&cm, m + i, s + i, oi, o2i, o2i ? c + i : NULL, 1, F);
      const float mi = m[i];
      for (int64_t p = p0; p < p1; p++) x[p - p0] -= mi;
      SC_FN(exp_chunk)(x, p1 - p0);
      if (key) SC_FN(chunk_scales)(col, p0, p1, key, target, 1, sids, srow0, dr, ds);
      vf O[SC_NV], O2[SC_NV];
      float S = s[i], C = 0;
      for (int v = 0; v < SC_NV; v++) O[v] = *(const vf *)(oi + v * L);
      if (o2i) {
        C = c[i];
        for (int v = 0; v < SC_NV; v++) O2[v] = *(const vf *)(o2i + v * L);
      }
      for (int64_t p = p0; p < p1; p++) {
        const float *row = src + (int64_t)col[p] * W;
        if (p + PF2 < pend) prefetch(src + (int64_t)col[p + PF2] * W, W);
        if (key) dsc = ds[p - p0];
        const float xp = x[p - p0], av = xp * dsc;
        S += xp; // dropped coefficients count here; they add 0 below
        if (o2i) {
          const float bv = av * sl[p - p0];
          C += xp * sl[p - p0];
          for (int v = 0; v < SC_NV; v++) {
            const vf rv = *(const vf *)(row + v * L);
            O[v] += av * rv;
            O2[v] += bv * rv;
          }
        } else {
          for (int v = 0; v < SC_NV; v++) O[v] += av * *(const vf *)(row + v * L);
        }
      }
      s[i] = S;
      for (int v = 0; v < SC_NV; v++) *(vf *)(oi + v * L) = O[v];
      if (o2i) {
        c[i] = C;
        for (int v = 0; v < SC_NV; v++) *(vf *)(o2i + v * L) = O2[v];
      }
    }
  }
}

SC_TARGET static void SC_FN(SC_CAT(neighbour1_, SC_NV))(const int64_t *rowptr, const int32_t *col,
    const float *src, const float *own, float *dU, float *dEr, int64_t r0, int64_t r1,
    uint64_t key, float keep, const int64_t *oids, int64_t orow0, const int64_t *tids,
    int64_t trow0) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float), F = SC_NV * L, W = F + 1, GW = F + 3, PER = CHUNK };
  const int64_t pend = rowptr[r1];
  const drop_of_t dr = drop_of(keep);
  float x[PER + 16], sl[PER], ds[PER + 8], dsc = 1.0f;
  for (int64_t r = r0; r < r1; r++) {
    const int64_t source = id_of(oids, orow0, r);
    const float *ur = own + r * W, err = ur[F];
    float *du = dU + r * F, acc = 0;
    vf DU[SC_NV], UR[SC_NV], GS[SC_NV];
    for (int v = 0; v < SC_NV; v++) {
      DU[v] = *(const vf *)(du + v * L);
      UR[v] = *(const vf *)(ur + v * L);
      GS[v] = (vf){0};
    }
    for (int64_t p0 = rowptr[r]; p0 < rowptr[r + 1]; p0 += PER) {
      const int64_t p1 = p0 + PER < rowptr[r + 1] ? p0 + PER : rowptr[r + 1];
      for (int64_t p = p0; p < p1; p++) {
        if (p + PF < pend) prefetch(src + (int64_t)col[p + PF] * GW, GW);
        const float *t = src + (int64_t)col[p] * GW + F; // el | lse | δ
        const float v = t[0] + err;
        x[p - p0] = leaky(v) - t[1]; // α = e^(score − lse)
        sl[p - p0] = leaky_slope(v);
      }
      SC_FN(exp_chunk)(x, p1 - p0);
      if (key) SC_FN(chunk_scales)(col, p0, p1, key, source, 0, tids, trow0, dr, ds);
      for (int64_t p = p0; p < p1; p++) {
        const float *g = src + (int64_t)col[p] * GW;
        if (p + PF2 < pend) prefetch(src + (int64_t)col[p + PF2] * GW, GW);
        if (key) dsc = ds[p - p0];
        const float xp = x[p - p0], da = dsc * xp, ws = da * sl[p - p0];
        for (int v = 0; v < SC_NV; v++) {
          const vf gk = *(const vf *)(g + v * L);
          DU[v] += da * gk;
          GS[v] += ws * gk;
        }
        acc -= xp * g[F + 2] * sl[p - p0];
      }
    }
    vf gu = GS[0] * UR[0];
    for (int v = 1; v < SC_NV; v++) gu += GS[v] * UR[v];
    acc += SC_FN(hsum)(gu);
    for (int v = 0; v < SC_NV; v++) *(vf *)(du + v * L) = DU[v];
    dEr[r] += acc;
  }
}

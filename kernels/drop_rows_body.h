// Dense dropout for one level, included by gemm_body.h: drop_rows, which
// the products call on their blocks of A, and the backwards built on it.

// drop_rows writes rows [r0, r1) of A (k columns) with the mask applied to
// dst, packed; dst may be A itself. With a list, it writes rows
// list[r0..r1) instead, packed, or in_place: each at its own row of dst.
// The draws are the pair hashes of dropout_rng.h (sc_hash32 and
// sc_drop_draw, written out here on vectors so they stay in registers);
// with the mask's bits (k a multiple of 32) they are recorded there, or
// read back from there in place of the hash.
SC_TARGET static void SC_FN(drop_rows)(const float *A, float *dst, int64_t k, int64_t r0, int64_t r1,
                                       const sc_mask *m, const int32_t *list, int in_place) {
  typedef SC_VF vf;
  typedef uint32_t vu __attribute__((vector_size(sizeof(vf))));
  typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));
  enum { NV = NVEC, L = VW / NVEC };
  // Low halves compare signed (AVX2 has no unsigned compare; they fit 16
  // bits), high halves unsigned in place (h ≥ thr·2¹⁶).
  const int32_t thr = m->thr > 0xffff ? 0xffff : (int32_t)m->thr;
  const float scale = m->scale;
  const uint64_t seed = m->seed, stream = m->stream;
  const int64_t *ids = m->ids, row0 = m->row0;
  // The hash's first product, (pair index)·K, as a sum: pair c0/2 + v·L +
  // lane gives (c0/2)·K + lk[v], exact in 32-bit arithmetic.
  vu lk[NV];
  for (int v = 0; v < NV; v++)
    for (int j = 0; j < L; j++) lk[v][j] = (uint32_t)(v * L + j) * 0x9e3779b9u;
  const vu thr_hi = (vu){0} + ((uint32_t)thr << 16);
  uint8_t *const bits = k % (2 * VW) == 0 ? m->bits : NULL;
  if (bits && m->replay) {
    for (int64_t i = r0; i < r1; i++) {
      const int64_t r = list ? list[i] : i;
      const float *a = A + r * k;
      const uint8_t *b = bits + r * m->bits_stride;
      float *d = dst + (in_place ? r : i - r0) * k;
      for (int64_t c = 0; c < k; c += L) {
        const vf y = *(const vf *)(a + c) * scale;
        *(vf *)(d + c) = (vf)((vi)y & (vi)SC_FN(get_bits)(b, c));
      }
    }
    return;
  }
  for (int64_t i = r0; i < r1; i++) {
    const int64_t r = list ? list[i] : i;
    const uint32_t key = sc_drop_key(seed, stream, (uint64_t)(ids ? ids[r] : row0 + r));
    const float *a = A + r * k;
    float *d = dst + (in_place ? r : i - r0) * k;
    uint8_t *b = bits ? bits + r * m->bits_stride : NULL;
    int64_t c0 = 0;
    // Groups of 32 columns: VW pair hashes, computed in registers; a hash's
    // low half draws for column c0 + p, its high half for c0 + 16 + p. Kept
    // values scaled, dropped ones and-ed to +0; each vector is loaded
    // before it is stored, so d may be a.
    for (; c0 + L <= k; c0 += 2 * VW) {
      vu h[NV];
      for (int v = 0; v < NV; v++) {
        vu x = (lk[v] + (uint32_t)(c0 / 2) * 0x9e3779b9u) ^ key;
        SC_HASH32_MIX(x);
        h[v] = x;
      }
      for (int v = 0; v < 2 * NV; v++) {
        const int64_t c = c0 + v * L;
        if (c + L > k) break;
        const vi keep = v < NV ? (vi)(h[v] & 0xffff) >= thr : (vi)(h[v - NV] >= thr_hi);
        const vf y = *(const vf *)(a + c) * scale;
        *(vf *)(d + c) = (vf)((vi)y & keep);
        if (b) SC_FN(put_bits)(b, c, (SC_FN(vi))keep);
      }
      if (c0 + 2 * VW > k) break; // a partial group: its rest below
    }
    for (int64_t c = c0 + (k - c0) / L * L; c < k; c++)
      d[c] = (int32_t)sc_drop_draw(key, (uint64_t)c) >= thr ? a[c] * scale : 0.0f;
  }
}

// drop_relu: sc_dropout_relu_backward's kernel.
SC_TARGET static void SC_FN(drop_relu)(float *g, const float *h, int64_t cols, int64_t r0, int64_t r1,
                                       const sc_mask *m, float *restrict sums) {
  const int64_t br = NARROW_SCRATCH / (cols > 0 ? cols : 1) + 1;
  if (sums)
    for (int64_t j = 0; j < cols; j++) sums[j] = 0.0f;
  for (int64_t r = r0; r < r1; r += br) {
    const int64_t e = r + br < r1 ? r + br : r1;
    SC_FN(drop_rows)(g, g + r * cols, cols, r, e, m, NULL, 0);
    for (int64_t i = r * cols; i < e * cols; i++) g[i] = h[i] > 0.0f ? g[i] : 0.0f;
    if (sums) // row by row, as sc_column_sums adds them
      for (int64_t i = r; i < e; i++)
        for (int64_t j = 0; j < cols; j++) sums[j] += g[i * cols + j];
  }
}

// relu_dropped: rows [r0, r1) of g = g·scale where d > 0, else 0, d being
// the forward's dropped ReLU output M(h): d > 0 exactly where the row's
// draw kept the value and h > 0, so no draw is made again. Column sums as
// drop_relu forms them.
SC_TARGET static void SC_FN(relu_dropped)(float *restrict g, const float *restrict d, int64_t cols,
                                          int64_t r0, int64_t r1, float scale, float *restrict sums) {
  if (sums)
    for (int64_t j = 0; j < cols; j++) sums[j] = 0.0f;
  // Blocks of rows, summed while still in L1. Each block's product is
  // and-ed with a mask, so the loop vectorizes: the compiler will not take
  // a product ahead of a select, and as a branch per value it mispredicts
  // on half the values.
  const int64_t br = NARROW_SCRATCH / (cols > 0 ? cols : 1) + 1;
  for (int64_t r = r0; r < r1; r += br) {
    const int64_t e = r + br < r1 ? r + br : r1;
    for (int64_t i = r * cols; i < e * cols; i++) {
      const float v = g[i] * scale;
      uint32_t b;
      memcpy(&b, &v, sizeof b);
      b &= -(uint32_t)(d[i] > 0.0f);
      memcpy(&g[i], &b, sizeof b);
    }
    if (sums) // row by row, as sc_column_sums adds them
      for (int64_t i = r; i < e; i++)
        for (int64_t j = 0; j < cols; j++) sums[j] += g[i * cols + j];
  }
}

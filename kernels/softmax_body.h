// The kernels on vexp for one level, included by cpu.c once per level after
// vexp_body.h (SC_SUFFIX, SC_TARGET: simd.h): the softmax cross-entropy,
// e^x and ELU.
//
// Softmax cross-entropy of the listed rows [i0, i1) of rows: returns their
// summed loss and writes their gradient rows (softmax − onehot)/norm into
// grad (nil: loss only; it may be z itself). A row is padded with −∞ to
// whole vectors, its exponentials taken on vectors (vexp, within 2 ulp of
// e^x) and summed in double in column order, as in the CUDA kernel; the
// sums' logs are taken as one log of their product (the CUDA kernel takes
// one a row: the losses agree to parts in 1e16, the gradients bit for
// bit). The rows go G at a time, their sums interleaved, so that the G
// chains of dependent adds overlap; the gradient is formed on vectors of
// doubles, the same arithmetic per value. Training rows are scattered, so
// each row is a cache miss: rows and their labels are prefetched ahead.
SC_TARGET static void SC_FN(softmax_ce)(const float *z, int64_t c, const int32_t *labels,
                                        const int32_t *rows, int64_t i0, int64_t i1, double norm,
                                        float *grad, double *out) {
  typedef SC_VF vf;
  typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));
  typedef double vd __attribute__((vector_size(sizeof(vf))));
  typedef float vh __attribute__((vector_size(sizeof(vf) / 2), aligned(4)));
  typedef int64_t vl __attribute__((vector_size(sizeof(vf))));
  enum { L = sizeof(vf) / sizeof(float), D = L / 2, G = 4 };
  // The one-hot row a vector at a time: lanes j with k + j = y are 1.0
  // (its bits, 0x3ff0…), by a compare rather than a branch per lane.
  vl iota, one;
  for (int j = 0; j < D; j++) iota[j] = j, one[j] = 0x3ff0000000000000LL;
  const int64_t nv = (c + L - 1) / L;
  vf e[G][nv > 0 ? nv : 1];
  const double inv_norm = 1 / norm;
  // Σ log s over the rows as the log of their product, its power of two
  // kept apart (renormalize, a group) so that it cannot overflow: one log
  // a call, not one a row.
  double loss = 0, prod = 1;
  int64_t pow2 = 0;
  for (int64_t i = i0; i < i1; i += G) {
    const int n = i1 - i < G ? (int)(i1 - i) : G;
    double s[G] = {0}, zy[G];
    float mx[G];
    for (int q = 0; q < n; q++) {
      const int64_t r = rows[i + q];
      const float *row = z + r * c;
      float *t = (float *)e[q];
      if (i + q + 2 * G < i1) {
        const int64_t ahead = rows[i + q + 2 * G];
        __builtin_prefetch(z + ahead * c);
        __builtin_prefetch(labels + ahead);
        if (grad) __builtin_prefetch(grad + ahead * c, 1);
      }
      for (int64_t k = 0; k < nv * L; k++) t[k] = k < c ? row[k] : -INFINITY;
      // the largest value, NaN passed over as the scalar select does
      vf m = e[q][0];
      for (int64_t v = 1; v < nv; v++) {
        const vi up = e[q][v] > m;
        m = (vf)(((vi)e[q][v] & up) | ((vi)m & ~up));
      }
      float x = -INFINITY;
      for (int j = 0; j < L; j++) x = m[j] > x ? m[j] : x;
      mx[q] = x;
      zy[q] = row[labels[r]];
      for (int64_t v = 0; v < nv; v++) e[q][v] = SC_FN(vexp)(e[q][v] - x);
    }
    for (int64_t k = 0; k < c; k++) // each row's sum in column order
      for (int q = 0; q < G; q++)
        if (q < n) s[q] += ((const float *)e[q])[k];
    for (int q = 0; q < n; q++) {
      const int64_t r = rows[i + q];
      loss += -(zy[q] - mx[q]);
      prod *= s[q];
      if (!grad) continue;
      float *g = grad + r * c;
      const float *t = (const float *)e[q];
      const int32_t y = labels[r];
      const double inv_s = 1 / s[q];
      int64_t k = 0;
      for (; k + D <= c; k += D) {
        vh tk;
        memcpy(&tk, t + k, sizeof tk);
        const vd hot = (vd)((iota == (vl){0} + (int64_t)(y - k)) & one);
        const vh gk = __builtin_convertvector((__builtin_convertvector(tk, vd) * inv_s - hot) * inv_norm, vh);
        memcpy(g + k, &gk, sizeof gk);
      }
      for (; k < c; k++) g[k] = (float)((t[k] * inv_s - (k == y)) * inv_norm);
    }
    pow2 += renormalize(&prod);
  }
  *out = loss + (log(prod) + (double)pow2 * M_LN2);
}

// sc_exp's kernel: y = e^x for n values x ≤ 0.
SC_TARGET static void SC_FN(exp_n)(const float *x, float *y, int64_t n) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float) };
  for (int64_t i = 0; i < n; i += L) {
    vf v;
    for (int j = 0; j < L; j++) v[j] = i + j < n ? x[i + j] : 0.0f;
    v = SC_FN(vexp)(v);
    for (int j = 0; j < L && i + j < n; j++) y[i + j] = v[j];
  }
}

// ELU in place on h[i0, i1).
SC_TARGET static void SC_FN(elu)(float *h, int64_t i0, int64_t i1) {
  typedef SC_VF vf;
  typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));
  enum { L = sizeof(vf) / sizeof(float) };
  for (; i0 + L <= i1; i0 += L) { // whole vectors: selected by a mask
    const vf x = *(const vf *)(h + i0);
    const vi neg = x < 0;
    const vf e = SC_FN(vexp)((vf)((vi)x & neg)) - 1.0f;
    *(vf *)(h + i0) = (vf)(((vi)e & neg) | ((vi)x & ~neg));
  }
  for (int64_t i = i0; i < i1; i += L) {
    const int m = i1 - i < L ? (int)(i1 - i) : L;
    vf v;
    for (int j = 0; j < L; j++) v[j] = j < m && h[i + j] < 0 ? h[i + j] : 0.0f;
    v = SC_FN(vexp)(v);
    for (int j = 0; j < m; j++)
      if (h[i + j] < 0) h[i + j] = v[j] - 1.0f;
  }
}

// ELU's backward, g·(h + 1) where h ≤ 0.
SC_TARGET static void SC_FN(elu_backward)(float *restrict g, const float *restrict h, int64_t i0,
                                          int64_t i1) {
  typedef SC_VF vf;
  typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));
  enum { L = sizeof(vf) / sizeof(float) };
  const vf one = (vf){0} + 1.0f;
  for (; i0 + L <= i1; i0 += L) {
    const vf x = *(const vf *)(h + i0);
    const vi le = x <= 0;
    *(vf *)(g + i0) *= (vf)(((vi)(x + 1.0f) & le) | ((vi)one & ~le));
  }
  for (int64_t i = i0; i < i1; i++) g[i] *= h[i] <= 0 ? h[i] + 1 : 1.0f;
}


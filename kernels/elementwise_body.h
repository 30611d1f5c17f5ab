// cpu.c's elementwise kernels for one level, included by cpu.c once per
// level that has them (SC_SUFFIX, SC_TARGET: simd.h).

// Rows [r0, r1), or rows list[r0..r1) with a list.
SC_TARGET static void SC_FN(bias_relu)(float *restrict z, const float *restrict bias, int64_t n,
                                       int64_t r0, int64_t r1, int relu, const int32_t *list) {
  for (int64_t i = r0; i < r1; i++) {
    float *restrict row = z + (list ? list[i] : i) * n;
    if (relu)
      SC_BIAS_RELU(row, row, bias, n)
    else
      for (int64_t c = 0; c < n; c++) row[c] += bias[c];
  }
}

// g = 0 where h <= 0, without branches (ReLU zeroes about half).
SC_TARGET static void SC_FN(relu_backward)(float *restrict g, const float *restrict h, int64_t i0,
                                           int64_t i1) {
  for (int64_t i = i0; i < i1; i++) g[i] = h[i] > 0.0f ? g[i] : 0.0f;
}

SC_TARGET static void SC_FN(triad)(float *a, const float *b, const float *c, float s, int64_t i0,
                                   int64_t i1) {
  for (int64_t i = i0; i < i1; i++) a[i] = b[i] + s * c[i];
}

SC_TARGET static void SC_FN(add)(float *restrict a, const float *restrict b, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i++) a[i] += b[i];
}

SC_TARGET static void SC_FN(scale_rows)(float *dst, const float *src, const float *s, int64_t n,
                                        int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r++)
    for (int64_t k = 0; k < n; k++) dst[r * n + k] = src[r * n + k] * s[r];
}

// Four independent sums, so the adds keep up with the loads.
SC_TARGET static void SC_FN(sum)(const float *a, int64_t i0, int64_t i1, int64_t reps, double *out) {
  typedef SC_VF vf;
  enum { L = sizeof(vf) / sizeof(float) };
  double t = 0;
  for (int64_t r = 0; r < reps; r++) {
    vf s[4] = {{0}};
    int64_t i = i0;
    for (; i + 4 * L <= i1; i += 4 * L)
      for (int u = 0; u < 4; u++) s[u] += *(const vf *)(a + i + u * L);
    for (int u = 0; u < 4; u++)
      for (int l = 0; l < L; l++) t += s[u][l];
    for (; i < i1; i++) t += a[i];
  }
  *out = t;
}

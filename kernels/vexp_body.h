// vexp for one level, included once per level (SC_SUFFIX, SC_TARGET:
// simd.h) by the kernels that take softmaxes (cpu.c: the loss and ELU;
// gat.c: attention), ahead of the kernels that call it.
//
// vexp is Cephes' expf on vectors: e^x = 2^n·e^r, n = round(x·log₂e),
// r = x − n·ln 2 in two parts, e^r a degree-7 polynomial. Softmax only
// takes it of x ≤ 0: below −87.33 (where e^x leaves the normal floats) it
// is 0, and a NaN stays a NaN (a NaN logit must make a NaN loss).
SC_TARGET static inline SC_VF SC_FN(vexp)(SC_VF x) {
  typedef SC_VF vf;
  typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));
  const vf n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const vf r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  vf y = 1.9875691500e-4f * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  const vi two_n = (__builtin_convertvector(n, vi) + 127) << 23;
  const vi under = x < -87.3365447505f;
  return (vf)((vi)(y * (vf)two_n) & ~under);
}

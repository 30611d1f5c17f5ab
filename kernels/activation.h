// The hidden layers' bias and ReLU, d = max(o + bias, 0) over n columns,
// written once for cpu.c's bias_relu and gemm.c's fused epilogue so the two
// leave the same bits. A macro, so it compiles at each caller's
// instruction set.
#ifndef SC_ACTIVATION_H
#define SC_ACTIVATION_H
#define SC_BIAS_RELU(d, o, bias, n)                                            \
  for (int64_t c_ = 0; c_ < (n); c_++) {                                       \
    const float v_ = (o)[c_] + (bias)[c_];                                     \
    (d)[c_] = v_ > 0.0f ? v_ : 0.0f;                                           \
  }
#endif

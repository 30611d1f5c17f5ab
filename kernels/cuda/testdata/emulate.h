// The CUDA kernels of ../sancus.cu compiled as C++ for the CPU: a grid is
// run block by block, thread by thread, in order (emulate.cpp). It checks
// what a kernel computes, not how it runs in parallel: only kernels whose
// threads write disjoint outputs and never synchronize are run this way.
#include <cmath>
#include <cstdint>
#include <cstring>
struct dim3e {
  unsigned x, y, z;
};
static dim3e threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
#define __CUDACC__ 1
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
template <class T> T __ldg(const T *p) { return *p; }
// The _rn intrinsics round each operation alone: volatile keeps the
// compiler from fusing them, as they keep nvcc from it.
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
inline void __syncthreads() {}
template <class F> void launch(unsigned gx, unsigned bx, F f) {
  gridDim = {gx, 1, 1};
  blockDim = {bx, 1, 1};
  for (unsigned b = 0; b < gx; b++)
    for (unsigned t = 0; t < bx; t++) {
      blockIdx = {b, 0, 0};
      threadIdx = {t, 0, 0};
      f();
    }
}
inline unsigned nb(long long total, unsigned per) { return (unsigned)((total + per - 1) / per); }

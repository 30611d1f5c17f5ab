// Run-time choice of instruction set (internal to the C kernels): each
// kernel is compiled once per level and PICK calls the best the CPU has,
// so a binary built on a login node never executes an instruction the
// compute node lacks.
#ifndef SC_SIMD_H
#define SC_SIMD_H
int sc_simd_level(void); // 0 baseline, 1 AVX2+FMA, 2 AVX-512 (F, DQ, BW, VL)

// Each level's native vector of floats (xmm, ymm, zmm); aligned(4) makes
// the loads unaligned.
typedef float vf_base __attribute__((vector_size(16), aligned(4)));
typedef float vf_avx2 __attribute__((vector_size(32), aligned(4)));
typedef float vf_avx512 __attribute__((vector_size(64), aligned(4)));

// A kernel compiled once per level is written as plain C in a body file
// (*_body.h, without an include guard). Its .c file includes the body once
// per level, with SC_SUFFIX (base, avx2 or avx512) and SC_TARGET (the
// level's target attribute, empty for base) defined before and #undef-ed
// after. In a body, SC_FN(name) is the level's name_SUFFIX (a function, or
// a per-level type such as vf_avx2) and SC_VF is the level's vector.
#define SC_CAT_(a, b) a##b
#define SC_CAT(a, b) SC_CAT_(a, b)
#define SC_FN(name) SC_CAT(name, SC_CAT(_, SC_SUFFIX))
#define SC_VF SC_FN(vf)

#if defined(__x86_64__) && defined(__GNUC__)
// The levels' targets, for the kernels compiled once per level.
#define SC_AVX2 __attribute__((target("avx2,fma")))
#define SC_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,fma,prefer-vector-width=512")))
#define PICK(name, ...) \
  do { if (sc_simd_level()) name##_avx2(__VA_ARGS__); else name##_base(__VA_ARGS__); } while (0)
#define PICK3(name, ...)                                 \
  do {                                                   \
    const int level_ = sc_simd_level();                  \
    if (level_ >= 2) name##_avx512(__VA_ARGS__);         \
    else if (level_ == 1) name##_avx2(__VA_ARGS__);      \
    else name##_base(__VA_ARGS__);                       \
  } while (0)
#else
#define PICK(name, ...) name##_base(__VA_ARGS__)
#define PICK3(name, ...) name##_base(__VA_ARGS__)
#endif

// FLUSH_DENORMALS runs a kernel body with denormal inputs read as zero and
// denormal results flushed to zero, restoring the caller's mode after: a
// denormal operand makes an FMA take a microcode assist, an order of
// magnitude slower over a block of them. Values that small carry nothing
// a float32 model can use.
#if defined(__x86_64__) && defined(__GNUC__)
#include <xmmintrin.h>
#define FLUSH_DENORMALS(body)                          \
  do {                                                 \
    const unsigned csr_ = _mm_getcsr();                \
    _mm_setcsr(csr_ | 0x8040); /* FTZ | DAZ */         \
    body;                                              \
    _mm_setcsr(csr_);                                  \
  } while (0)
// HONOR_DENORMALS runs body in IEEE mode inside a FLUSH_DENORMALS kernel:
// an epilogue that must equal an elementwise kernel run outside one.
#define HONOR_DENORMALS(body)                          \
  do {                                                 \
    const unsigned csr_ = _mm_getcsr();                \
    _mm_setcsr(csr_ & ~0x8040u);                       \
    body;                                              \
    _mm_setcsr(csr_);                                  \
  } while (0)
#else
#define FLUSH_DENORMALS(body) body
#define HONOR_DENORMALS(body) body
#endif
#endif

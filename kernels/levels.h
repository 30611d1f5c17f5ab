// The body files SC_BODY and, where defined, SC_BODY2, once per
// instruction set this compiler can target, each under its SC_SUFFIX and
// SC_TARGET: a kernel file names its bodies and includes this, instead
// of spelling out the three levels itself.
#define SC_SUFFIX base
#define SC_TARGET
#include SC_BODY
#ifdef SC_BODY2
#include SC_BODY2
#endif
#undef SC_SUFFIX
#undef SC_TARGET
#if defined(__x86_64__) && defined(__GNUC__)
#define SC_SUFFIX avx2
#define SC_TARGET SC_AVX2
#include SC_BODY
#ifdef SC_BODY2
#include SC_BODY2
#endif
#undef SC_SUFFIX
#undef SC_TARGET
#define SC_SUFFIX avx512
#define SC_TARGET SC_AVX512
#include SC_BODY
#ifdef SC_BODY2
#include SC_BODY2
#endif
#undef SC_SUFFIX
#undef SC_TARGET
#endif
#undef SC_BODY
#undef SC_BODY2

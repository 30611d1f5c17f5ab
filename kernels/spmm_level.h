// The SpMM (spmm_body.h), its transpose (spmm_t_body.h) and gather, the
// SpMM's gathers without the products (the kernel benchmark's), at the
// level that SC_SUFFIX, SC_TARGET and SC_NVMAX name: cpu.c includes this
// once per instruction set.
#define SC_SPMM spmm
#define SC_WEIGHT(p) val[p] *
#define SC_SPMM_COLS
#include "spmm_body.h"
#undef SC_SPMM_COLS
#undef SC_SPMM
#undef SC_WEIGHT
#include "spmm_t_body.h"
#define SC_SPMM gather
#define SC_WEIGHT(p)
#include "spmm_body.h"
#undef SC_SPMM
#undef SC_WEIGHT

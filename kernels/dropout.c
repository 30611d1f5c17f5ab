// Dropout of sparse rows; dense rows are dropped in gemm.c, next to the
// products that consume them. Masks are a pure function of (seed, stream,
// node id, column) (dropout_rng.h), so they do not depend on how rows are
// split over ranks or threads.
#include "cpu.h"
#include "dropout_rng.h"
#include "simd.h"

// drop_csr, once per level (dropout_body.h).
#define SC_BODY "dropout_body.h"
#include "levels.h"

void sc_dropout_csr(const int64_t *rowptr, const int32_t *col, const float *val, float *out,
                    int64_t r0, int64_t r1, const sc_mask *m) {
  PICK3(drop_csr, rowptr, col, val, out, r0, r1, m);
}

// Dropout of sparse rows; dense rows are dropped in gemm.c, next to the
// products that consume them. Masks are a pure function of (seed, stream,
// node id, column) (dropout_rng.h), so they do not depend on how rows are
// split over ranks or threads.
#include "cpu.h"
#include "dropout_rng.h"

void sc_dropout_csr(const int64_t *rowptr, const int32_t *col, const float *val, float *out,
                    int64_t r0, int64_t r1, const sc_mask *m) {
  for (int64_t r = r0; r < r1; r++) {
    const uint32_t key = sc_drop_key(m->seed, m->stream, (uint64_t)(m->ids ? m->ids[r] : m->row0 + r));
    for (int64_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
      const int32_t keep = ~(((int32_t)sc_drop_draw(key, (uint64_t)col[p]) - (int32_t)m->thr) >> 31);
      union { float f; int32_t i; } v = {.f = val[p] * m->scale};
      v.i &= keep;
      out[p] = v.f;
    }
  }
}

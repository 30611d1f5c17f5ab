// Dropout masks: a pure function of (seed, stream, node id, column), so
// they do not depend on how rows are split over ranks or threads. The
// random stream is in dropout_rng.h, shared with the CUDA kernels.
#include "cpu.h"
#include "dropout_rng.h"

// Random words for a row are drawn first (a serial chain), then applied in
// a loop the compiler vectorizes: 16-bit lane l of word q masks column 4q+l.
#define DROP_ROW_TILE 1024
void sc_dropout_dense(const float *src, float *dst, int64_t cols, int64_t r0, int64_t r1,
                      uint64_t seed, uint64_t stream, int64_t row0, const int64_t *ids,
                      uint32_t thr, float scale) {
  uint64_t words[DROP_ROW_TILE / 4];
  const uint16_t *lanes = (const uint16_t *)words;
  for (int64_t r = r0; r < r1; r++) {
    uint64_t s = sc_row_key(seed, stream, (uint64_t)(ids ? ids[r] : row0 + r));
    const float *a = src + r * cols;
    float *d = dst + r * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += DROP_ROW_TILE) {
      int64_t n = cols - c0 < DROP_ROW_TILE ? cols - c0 : DROP_ROW_TILE;
      for (int64_t q = 0; q < (n + 3) / 4; q++) words[q] = sc_next_word(&s);
      const uint16_t t16 = thr > 0xffff ? 0xffff : (uint16_t)thr;
      // Branch-free: a 50% drop rate would mispredict every other element.
      for (int64_t j = 0; j < n; j++) {
        const int32_t keep = ~(((int32_t)lanes[j] - (int32_t)t16) >> 31); // all ones if kept
        union { float f; int32_t i; } v = {.f = a[c0 + j] * scale};
        v.i &= keep;
        d[c0 + j] = v.f;
      }
    }
  }
}

// Sparse rows: column c's bits are word c/4 of the row's stream, so the
// stream is advanced up to the column (columns are sorted).
void sc_dropout_csr(const int64_t *rowptr, const int32_t *col, const float *val, float *out,
                    int64_t r0, int64_t r1, uint64_t seed, uint64_t stream, int64_t row0,
                    const int64_t *ids, uint32_t thr, float scale) {
  for (int64_t r = r0; r < r1; r++) {
    uint64_t s = sc_row_key(seed, stream, (uint64_t)(ids ? ids[r] : row0 + r));
    int64_t q = -1;
    uint64_t w = 0;
    for (int64_t p = rowptr[r]; p < rowptr[r + 1]; p++) {
      int64_t c = col[p];
      while (q < c / 4) { w = sc_next_word(&s); q++; }
      uint32_t u = (uint32_t)(w >> (16 * (c & 3))) & 0xffff;
      const int32_t keep = ~(((int32_t)u - (int32_t)thr) >> 31);
      union { float f; int32_t i; } v = {.f = val[p] * scale};
      v.i &= keep;
      out[p] = v.f;
    }
  }
}

// Dense GEMM for a GNN's shapes: a tall-skinny A (many rows, 16 to a few
// hundred columns) times a small B that stays in L1/L2. One register tile
// serves both products: MR scalars a_i broadcast against one 16-float row
// vector b, summed over a count,
//
//   A·B:   c[i] += A[r+i][q] · B[q]   over q  (A's rows, B's rows)
//   Aᵀ·B:  c[i] += A[r][q+i] · B[r]   over r  (A's columns, B's rows)
//
// so only the strides differ. Dropout of A is drawn into a small scratch
// block (L1/L2) right before the block is multiplied, so the dropped copy of
// A never goes to memory. The backward pass applies the same mask again,
// read from the bits the forward recorded (sc_mask.bits; one per value, a
// 32nd of A) where the operand keeps them, else drawn again.
#include "activation.h"
#include "cpu.h"
#include "dropout_rng.h"
#include "simd.h"
#include <stdlib.h>
#include <string.h>

// A tile is VW = 16 columns: one zmm under AVX-512, two ymm under AVX2,
// four xmm on baseline x86-64 (each level's native vector, simd.h; wider
// generic vectors compile to poor code).
#define VW 16
// NVEC is the vectors in a tile at the level being compiled (simd.h).
#define NVEC (VW / (int)(sizeof(SC_VF) / sizeof(float)))

// Scratch blocks of dropped A, per thread: SCRATCH floats (128 KiB, in L2)
// for a wide product. A narrow one (n ≤ 32, whose next block is prefetched
// while this one is multiplied) takes NARROW_SCRATCH floats (16 KiB): the
// prefetched block is still in L1 when it is dropped. Blocks are whole
// tiles of BLOCK_MR rows (every level's MR divides it) where a row is
// narrow enough.
#define SCRATCH 32768
#define NARROW_SCRATCH 4096
#define BLOCK_MR 12
// A per-thread buffer of at least want floats, kept for the next call.
typedef struct {
  float *p;
  int64_t len;
} sc_buf;

static float *grow(sc_buf *b, int64_t want) {
  if (b->len < want) {
    free(b->p);
    b->p = aligned_alloc(64, (size_t)(want * sizeof(float) + 63) / 64 * 64);
    b->len = b->p ? want : 0;
  }
  return b->p;
}

static __thread sc_buf scratch;

static float *scratch_buf(int64_t floats) { return grow(&scratch, floats); }

// block_rows is how many rows w floats wide a scratch block holds, for a
// product n wide: NARROW_SCRATCH's worth for a narrow product, SCRATCH's
// for a wide one or where fewer than BLOCK_MR rows would fit (Cora's 1,433
// features: 12 rows), rounded down to whole tiles, and one row when even
// that is wider than SCRATCH.
static int64_t block_rows(int64_t w, int64_t n) {
  const int64_t ww = w > 0 ? w : 1;
  int64_t b = (n <= 2 * VW ? NARROW_SCRATCH : SCRATCH) / ww;
  if (b < BLOCK_MR) b = SCRATCH / ww;
  if (b >= BLOCK_MR) b = b / BLOCK_MR * BLOCK_MR;
  return b > 1 ? b : 1;
}

// sc_pf walks the cache lines of the next block of A's rows (rows [i, e),
// or rows list[i..e)), one line per call: the tiles issue it once per step,
// so the next block streams into L2 while this one is multiplied. Without
// it a core alternates between waiting on memory (dropping a block into
// scratch) and computing (the tiles): prefetched, the two overlap. A tile
// walks a copy of the cursor in registers: read through the pointer, its
// fields were loaded and stored every step, a dependency through memory.
typedef struct {
  const char *line, *end; // the run of lines being walked: one row, or the whole block
  const char *base;
  const int32_t *list;
  int64_t i, e, row_bytes;
} sc_pf;

// pf_row starts the next listed row's run.
static inline void pf_row(sc_pf *p) {
  if (p->i >= p->e) return;
  p->line = p->base + (int64_t)p->list[p->i++] * p->row_bytes;
  p->end = p->line + p->row_bytes;
  __builtin_prefetch(p->line, 0, 2);
  p->line += 64;
}

static inline void pf_next(sc_pf *p) {
  if (p->line < p->end) {
    __builtin_prefetch(p->line, 0, 2);
    p->line += 64;
  } else if (p->list) {
    pf_row(p);
  }
}

// next_block is the cursor over rows [e, min(e + br, end)) of A (k wide),
// or over those positions of list: without a list the rows are one run.
static sc_pf next_block(const float *A, const int32_t *list, int64_t k, int64_t e, int64_t br, int64_t end) {
  const int64_t last = e + br < end ? e + br : end, rb = k * (int64_t)sizeof(float);
  const char *base = (const char *)A;
  if (list) return (sc_pf){NULL, NULL, base, list, e, last, rb};
  return (sc_pf){base + e * rb, base + (last > e ? last : e) * rb, base, NULL, 0, 0, rb};
}

// narrow_pf is p for a product of at most two tiles' width (n ≤ 32), and
// none for a wider one: its tiles run long enough per block that the
// prefetches only cost.
static sc_pf *narrow_pf(sc_pf *p, int64_t n) { return n <= 2 * VW ? p : NULL; }

// The columns past the last full vector (n % VW: an output layer's
// classes, 7 for Cora) run as one more tile over those columns of b,
// packed once a panel into cnt rows of VW floats, zero past them
// (edge_pack), into a VW-wide copy of C's: on vectors, not a scalar loop.
static __thread sc_buf edge_b;
static const float *edge_pack(const float *b, int64_t bs, int64_t cnt, int64_t w) {
  float *p = grow(&edge_b, cnt * VW);
  for (int64_t t = 0; t < cnt; t++)
    for (int64_t j = 0; j < VW; j++) p[t * VW + j] = j < w ? b[t * bs + j] : 0.0f;
  return p;
}

// put_bits and get_bits, once per level (keep_bits_body.h).
typedef int32_t vi_base __attribute__((vector_size(16), aligned(4)));
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
typedef int32_t vi_avx2 __attribute__((vector_size(32), aligned(4)));
typedef int32_t vi_avx512 __attribute__((vector_size(64), aligned(4)));
#define SC_SUFFIX base
#define SC_TARGET
#define SC_MOVEMASK(keep) _mm_movemask_ps((__m128)keep)
#include "keep_bits_body.h"
#undef SC_SUFFIX
#undef SC_TARGET
#undef SC_MOVEMASK
#define SC_SUFFIX avx2
#define SC_TARGET SC_AVX2
#define SC_MOVEMASK(keep) _mm256_movemask_ps((__m256)keep)
#include "keep_bits_body.h"
#undef SC_SUFFIX
#undef SC_TARGET
#undef SC_MOVEMASK
#define SC_SUFFIX avx512
#define SC_TARGET SC_AVX512
#define SC_MOVEMASK(keep) _mm512_movepi32_mask((__m512i)keep)
#include "keep_bits_body.h"
#undef SC_SUFFIX
#undef SC_TARGET
#undef SC_MOVEMASK
#else
static inline uint32_t movemask_base(vi_base keep) {
  uint32_t x = 0;
  for (int j = 0; j < 4; j++) x |= (uint32_t)(keep[j] & 1) << j;
  return x;
}
#define SC_SUFFIX base
#define SC_TARGET
#define SC_MOVEMASK(keep) movemask_base(keep)
#include "keep_bits_body.h"
#undef SC_SUFFIX
#undef SC_TARGET
#undef SC_MOVEMASK
#endif

// A weight gradient with a narrow B (n ≤ 32, as G of a GNN's hidden 16) is
// formed transposed, Cᵀ (n×k) = Bᵀ·A: JB of B's values broadcast against KV
// vectors of A's row, so each A vector loaded serves JB FMAs (the tiles
// load a broadcast per FMA, and read A column-strided). Every
// element is the same chain of FMAs in the same row order, so the result
// is bitwise the same; Cᵀ is kept per thread and transposed into C at the end.
static __thread sc_buf ctb;

static void transpose_into(float *C, const float *ct, int64_t k, int64_t n) {
  for (int64_t q = 0; q < k; q++)
    for (int64_t j = 0; j < n; j++) C[q * n + j] = ct[j * k + q];
}

// Row lists, for a consumer that reads only some rows (the loss reads the
// training rows): blocks of the listed rows of A (dropped, with a mask) and,
// for Aᵀ·B, of B are gathered into scratch and multiplied as a packed
// panel; A·B's rows are scattered back, so C's other rows are left as they
// were. Each listed row of A·B is formed exactly as the full product forms it.
// gather_rows packs the listed rows of w floats and scatter_rows puts
// packed rows back: cpu.c's row movers, which prefetch the rows ahead.
static void gather_rows(const float *src, int64_t w, const int32_t *rows, int64_t cnt, float *dst) {
  sc_gather_rows((char *)dst, (const char *)src, rows, cnt, w * (int64_t)sizeof(float));
}
static void scatter_rows(float *dst, int64_t w, const int32_t *rows, int64_t cnt, const float *src) {
  sc_scatter_rows((char *)dst, (const char *)src, rows, cnt, w * (int64_t)sizeof(float));
}
// prefetch_rows asks L2 for the listed rows of w floats: Aᵀ·B's next block
// of B, whose rows the cursor (which walks A's) does not cover. It pays
// where B is narrow (a few lines a row); with B 256 wide the burst only
// costs, as the cursor's prefetches do there.
static void prefetch_rows(const float *src, int64_t w, const int32_t *rows, int64_t cnt) {
  for (int64_t i = 0; i < cnt; i++)
    for (int64_t b = 0; b < w * (int64_t)sizeof(float); b += 64)
      __builtin_prefetch((const char *)(src + (int64_t)rows[i] * w) + b, 0, 2);
}
// run_of is where listed rows [r, e) lie in src (w floats a row) if they
// are consecutive rows, else NULL: such a block is read where it is, not
// gathered (layer 1, restricted to the rows a last layer reads, lists
// nearly every row).
static const float *run_of(const float *src, int64_t w, const int32_t *rows, int64_t r, int64_t e) {
  for (int64_t i = r + 1; i < e; i++)
    if (rows[i] != rows[i - 1] + 1) return NULL;
  return src + (int64_t)rows[r] * w;
}

// The kernels, once per level (gemm_body.h). MR·NVEC accumulators cover
// the FMA latency and leave registers for b; the transposed tile's
// JB·KV·NVEC accumulators leave room for KV·NVEC vectors of A and JB
// broadcasts (16 xmm or ymm, 32 zmm).
#define SC_SUFFIX base
#define SC_TARGET
#define SC_MR 3
#define SC_JB 2
#define SC_KV 1
#include "gemm_body.h"
#undef SC_SUFFIX
#undef SC_TARGET
#undef SC_MR
#undef SC_JB
#undef SC_KV
#if defined(__x86_64__) && defined(__GNUC__)
#define SC_SUFFIX avx2
#define SC_TARGET SC_AVX2
#define SC_MR 6
#define SC_JB 2
#define SC_KV 2
#include "gemm_body.h"
#undef SC_SUFFIX
#undef SC_TARGET
#undef SC_MR
#undef SC_JB
#undef SC_KV
#define SC_SUFFIX avx512
#define SC_TARGET SC_AVX512
#define SC_MR 12
#define SC_JB 4
#define SC_KV 4
#include "gemm_body.h"
#undef SC_SUFFIX
#undef SC_TARGET
#undef SC_MR
#undef SC_JB
#undef SC_KV
#endif

void sc_gemm_nn(const float *A, const float *B, float *C, int64_t k, int64_t n, int64_t r0,
                int64_t r1, int acc, const sc_mask *m) {
  FLUSH_DENORMALS(PICK3(gemm_nn, A, B, C, k, n, r0, r1, acc, m));
}

void sc_gemm_tn(const float *A, const float *B, float *C, int64_t k, int64_t n, int64_t r0,
                int64_t r1, const sc_mask *m) {
  FLUSH_DENORMALS(PICK3(gemm_tn, A, B, C, k, n, r0, r1, m));
}

// With bias, each listed row of C is written as ReLU(row + bias), and with
// then, that row dropped by then into the same row of dropped too.
void sc_gemm_nn_rows(const float *A, const float *B, float *C, int64_t k, int64_t n,
                     const int32_t *rows, int64_t cnt, const sc_mask *m, const float *bias,
                     const sc_mask *then, float *dropped) {
  FLUSH_DENORMALS(PICK3(gemm_nn_rows, A, B, C, k, n, rows, cnt, m, bias, then, dropped));
}

void sc_gemm_tn_rows(const float *A, const float *B, float *C, int64_t k, int64_t n,
                     const int32_t *rows, int64_t cnt, const sc_mask *m) {
  FLUSH_DENORMALS(PICK3(gemm_tn_rows, A, B, C, k, n, rows, cnt, m));
}

void sc_dropout_dense(const float *src, float *dst, int64_t cols, int64_t r0, int64_t r1,
                      const sc_mask *m) {
  // In place or not, drop_rows writes dst's rows from r0 on.
  PICK3(drop_rows, src, dst + r0 * cols, cols, r0, r1, m, NULL, 0);
}

// sc_dropout_rows drops the listed rows of src into the same rows of dst
// (rows[0..cnt)), leaving dst's other rows as they are.
void sc_dropout_rows(const float *src, float *dst, int64_t cols, const int32_t *rows, int64_t cnt,
                     const sc_mask *m) {
  PICK3(drop_rows, src, dst, cols, 0, cnt, m, rows, 1);
}

// sc_dropout_gather packs the listed rows of src into dst with the mask
// applied (dst's i-th row is row rows[i], dropped).
void sc_dropout_gather(const float *src, float *dst, int64_t cols, const int32_t *rows, int64_t cnt,
                       const sc_mask *m) {
  PICK3(drop_rows, src, dst, cols, 0, cnt, m, rows, 0);
}

// sc_dropout_relu_backward is dropout's backward then ReLU's on rows
// [r0, r1) of g, in place: g = M(g) where h > 0, else 0. Blocks of rows are
// dropped, then clamped while still in L1: one pass over g instead of two.
// With sums (cols wide), it also sets them to the column sums of the rows
// it wrote, added in row order as sc_column_sums adds them: a bias
// gradient without a third pass.
void sc_dropout_relu_backward(float *g, const float *h, int64_t cols, int64_t r0, int64_t r1,
                              const sc_mask *m, float *sums) {
  PICK3(drop_relu, g, h, cols, r0, r1, m, sums);
}

// sc_relu_dropped_backward is sc_dropout_relu_backward given the forward's
// dropped output d = M(h) instead of h and the mask: the same g and sums.
void sc_relu_dropped_backward(float *g, const float *d, int64_t cols, int64_t r0, int64_t r1,
                              float scale, float *sums) {
  PICK3(relu_dropped, g, d, cols, r0, r1, scale, sums);
}

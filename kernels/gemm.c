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
#define NVEC(SUFFIX) (VW / (int)(sizeof(vf_##SUFFIX) / sizeof(float)))

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
// prefetches only cost (up to a quarter of n×256's weight gradient).
static sc_pf *narrow_pf(sc_pf *p, int64_t n) { return n <= 2 * VW ? p : NULL; }

// TILE(MR) defines tile_MR: c (MR rows of ldc, one vector wide) = or +=
// Σ_{t<cnt} a[i·ai + t·as] · b[t·bs], prefetching a line per step with pf.
#define TILE(MR, SUFFIX, ATTR)                                                 \
  ATTR static inline void tile##MR##_##SUFFIX(const float *restrict a, int64_t ai, int64_t as, \
      const float *restrict b, int64_t bs, int64_t cnt, float *restrict c, int64_t ldc, int acc, \
      sc_pf *pf) {                                                             \
    typedef vf_##SUFFIX vf;                                                    \
    enum { NV = NVEC(SUFFIX), L = VW / NVEC(SUFFIX) };                         \
    vf s[MR][NV];                                                              \
    for (int i = 0; i < MR; i++)                                               \
      for (int v = 0; v < NV; v++) s[i][v] = acc ? *(const vf *)(c + i * ldc + v * L) : (vf){0}; \
    sc_pf q = pf ? *pf : (sc_pf){0};                                           \
    for (int64_t t = 0; t < cnt; t++) {                                        \
      pf_next(&q);                                                             \
      vf bv[NV];                                                               \
      for (int v = 0; v < NV; v++) bv[v] = *(const vf *)(b + t * bs + v * L);  \
      for (int i = 0; i < MR; i++) {                                           \
        const float x = a[i * ai + t * as];                                    \
        for (int v = 0; v < NV; v++) s[i][v] += x * bv[v];                     \
      }                                                                        \
    }                                                                          \
    if (pf) *pf = q;                                                           \
    for (int i = 0; i < MR; i++)                                               \
      for (int v = 0; v < NV; v++) *(vf *)(c + i * ldc + v * L) = s[i][v];     \
  }

// The columns past the last full vector (n % VW: an output layer's
// classes, 7 for Cora) run as one more tile over those columns of b,
// packed once a panel into cnt rows of VW floats, zero past them
// (edge_pack), into a VW-wide copy of C's: on vectors, where a scalar
// loop over them took a fifth of a GAT epoch on Cora.
static __thread sc_buf edge_b;
static const float *edge_pack(const float *b, int64_t bs, int64_t cnt, int64_t w) {
  float *p = grow(&edge_b, cnt * VW);
  for (int64_t t = 0; t < cnt; t++)
    for (int64_t j = 0; j < VW; j++) p[t * VW + j] = j < w ? b[t * bs + j] : 0.0f;
  return p;
}

// panel computes rows [0, m) of C (m×n, ldc n) from a, whose row i / count
// t element is a[i·ai + t·as], and b's rows (t·n): full tiles of MR rows,
// then tiles of 4, 2 and 1 (a weight gradient's m is A's width, often
// not a multiple of MR, and a one-row tile runs at an eighth of the rate).
#define PANEL_ROWS(R, SUFFIX)                                                  \
  for (; i + R <= m; i += R) {                                                 \
    for (int64_t j = 0; j < nv; j += VW)                                       \
      tile##R##_##SUFFIX(a + i * ai, ai, as, b + j, n, cnt, c + i * n + j, n, acc, pf); \
    if (nv < n) {                                                              \
      float ct[R * VW];                                                        \
      for (int r = 0; r < R; r++)                                              \
        for (int64_t j = 0; j < VW; j++) ct[r * VW + j] = acc && j < n - nv ? c[(i + r) * n + nv + j] : 0.0f; \
      tile##R##_##SUFFIX(a + i * ai, ai, as, bp, VW, cnt, ct, VW, acc, NULL);  \
      for (int r = 0; r < R; r++)                                              \
        for (int64_t j = 0; j < n - nv; j++) c[(i + r) * n + nv + j] = ct[r * VW + j]; \
    }                                                                          \
  }
#define PANEL(MR, SUFFIX, ATTR)                                                \
  ATTR static void panel_##SUFFIX(const float *a, int64_t ai, int64_t as, const float *b, \
                                  int64_t cnt, float *c, int64_t m, int64_t n, int acc, sc_pf *pf) { \
    const int64_t nv = n / VW * VW;                                            \
    const float *bp = nv < n ? edge_pack(b + nv, n, cnt, n - nv) : NULL;       \
    int64_t i = 0;                                                             \
    PANEL_ROWS(MR, SUFFIX)                                                     \
    PANEL_ROWS(4, SUFFIX)                                                      \
    PANEL_ROWS(2, SUFFIX)                                                      \
    PANEL_ROWS(1, SUFFIX)                                                      \
  }

// A vector's kept lanes as bits (lane j: bit j) and back, for a mask's
// record (sc_mask.bits). Below L = 8 lanes two vectors share a byte.
#define KEEP_BITS(SUFFIX, ATTR, MOVEMASK)                                      \
  ATTR static inline void put_bits_##SUFFIX(uint8_t *b, int64_t c, vi_##SUFFIX keep) { \
    enum { L = sizeof(keep) / sizeof(int32_t) };                               \
    const uint32_t x = (uint32_t)MOVEMASK;                                     \
    if (L == 16)                                                               \
      memcpy(b + c / 8, &(uint16_t){(uint16_t)x}, 2);                          \
    else if (L == 8)                                                           \
      b[c / 8] = (uint8_t)x;                                                   \
    else                                                                       \
      b[c / 8] = (c & 7) ? (uint8_t)(b[c / 8] | x << 4) : (uint8_t)x;          \
  }                                                                            \
  ATTR static inline vi_##SUFFIX get_bits_##SUFFIX(const uint8_t *b, int64_t c) { \
    typedef uint32_t vu __attribute__((vector_size(sizeof(vi_##SUFFIX))));     \
    enum { L = sizeof(vi_##SUFFIX) / sizeof(int32_t) };                        \
    uint32_t x;                                                                \
    if (L == 16) {                                                             \
      uint16_t w;                                                              \
      memcpy(&w, b + c / 8, 2);                                                \
      x = w;                                                                   \
    } else                                                                     \
      x = (uint32_t)b[c / 8] >> (c & 7);                                       \
    vu lane;                                                                   \
    for (int j = 0; j < L; j++) lane[j] = 1u << j;                             \
    return (vi_##SUFFIX)(((vu){0} + x & lane) != 0);                           \
  }
typedef int32_t vi_base __attribute__((vector_size(16), aligned(4)));
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
typedef int32_t vi_avx2 __attribute__((vector_size(32), aligned(4)));
typedef int32_t vi_avx512 __attribute__((vector_size(64), aligned(4)));
KEEP_BITS(base, , _mm_movemask_ps((__m128)keep))
KEEP_BITS(avx2, SC_AVX2, _mm256_movemask_ps((__m256)keep))
KEEP_BITS(avx512, SC_AVX512, _mm512_movepi32_mask((__m512i)keep))
#else
static inline uint32_t movemask_base(vi_base keep) {
  uint32_t x = 0;
  for (int j = 0; j < 4; j++) x |= (uint32_t)(keep[j] & 1) << j;
  return x;
}
KEEP_BITS(base, , movemask_base(keep))
#endif

// drop_rows writes rows [r0, r1) of A (k columns) with the mask applied to
// dst, packed; dst may be A itself. With a list, it writes rows
// list[r0..r1) instead, packed, or in_place: each at its own row of dst.
// The draws are the pair hashes of dropout_rng.h (sc_hash32 and
// sc_drop_draw, written out here on vectors so they stay in registers);
// with the mask's bits (k a multiple of 32) they are recorded there, or
// read back from there in place of the hash.
#define DROP_ROWS(SUFFIX, ATTR)                                                \
  ATTR static void drop_rows_##SUFFIX(const float *A, float *dst, int64_t k, int64_t r0, \
                                      int64_t r1, const sc_mask *m, const int32_t *list, \
                                      int in_place) {                          \
    typedef vf_##SUFFIX vf;                                                    \
    typedef uint32_t vu __attribute__((vector_size(sizeof(vf))));              \
    typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));   \
    enum { NV = NVEC(SUFFIX), L = VW / NVEC(SUFFIX) };                         \
    /* Low halves compare signed (AVX2 has no unsigned compare; they fit */   \
    /* 16 bits), high halves unsigned in place (h ≥ thr·2¹⁶).            */   \
    const int32_t thr = m->thr > 0xffff ? 0xffff : (int32_t)m->thr;            \
    const float scale = m->scale;                                              \
    const uint64_t seed = m->seed, stream = m->stream;                         \
    const int64_t *ids = m->ids, row0 = m->row0;                               \
    /* The hash's first product, (pair index)·K, as a sum: pair c0/2 + v·L + */ \
    /* lane gives (c0/2)·K + lk[v], exact in 32-bit arithmetic.             */ \
    vu lk[NV];                                                                 \
    for (int v = 0; v < NV; v++)                                               \
      for (int j = 0; j < L; j++) lk[v][j] = (uint32_t)(v * L + j) * 0x9e3779b9u; \
    const vu thr_hi = (vu){0} + ((uint32_t)thr << 16);                         \
    uint8_t *const bits = k % (2 * VW) == 0 ? m->bits : NULL;                  \
    if (bits && m->replay) {                                                   \
      for (int64_t i = r0; i < r1; i++) {                                      \
        const int64_t r = list ? list[i] : i;                                  \
        const float *a = A + r * k;                                            \
        const uint8_t *b = bits + r * m->bits_stride;                          \
        float *d = dst + (in_place ? r : i - r0) * k;                          \
        for (int64_t c = 0; c < k; c += L) {                                   \
          const vf y = *(const vf *)(a + c) * scale;                           \
          *(vf *)(d + c) = (vf)((vi)y & (vi)get_bits_##SUFFIX(b, c));          \
        }                                                                      \
      }                                                                        \
      return;                                                                  \
    }                                                                          \
    for (int64_t i = r0; i < r1; i++) {                                        \
      const int64_t r = list ? list[i] : i;                                    \
      const uint32_t key = sc_drop_key(seed, stream, (uint64_t)(ids ? ids[r] : row0 + r)); \
      const float *a = A + r * k;                                              \
      float *d = dst + (in_place ? r : i - r0) * k;                            \
      uint8_t *b = bits ? bits + r * m->bits_stride : NULL;                    \
      int64_t c0 = 0;                                                          \
      /* Groups of 32 columns: VW pair hashes, computed in registers; a     */ \
      /* hash's low half draws for column c0 + p, its high half for       */ \
      /* c0 + 16 + p. Kept values scaled, dropped ones and-ed to +0; each */ \
      /* vector is loaded before it is stored, so d may be a.              */ \
      for (; c0 + L <= k; c0 += 2 * VW) {                                      \
        vu h[NV];                                                              \
        for (int v = 0; v < NV; v++) {                                         \
          vu x = (lk[v] + (uint32_t)(c0 / 2) * 0x9e3779b9u) ^ key;             \
          SC_HASH32_MIX(x);                                                    \
          h[v] = x;                                                            \
        }                                                                      \
        for (int v = 0; v < 2 * NV; v++) {                                     \
          const int64_t c = c0 + v * L;                                        \
          if (c + L > k) break;                                                \
          const vi keep = v < NV ? (vi)(h[v] & 0xffff) >= thr : (vi)(h[v - NV] >= thr_hi); \
          const vf y = *(const vf *)(a + c) * scale;                           \
          *(vf *)(d + c) = (vf)((vi)y & keep);                                 \
          if (b) put_bits_##SUFFIX(b, c, (vi_##SUFFIX)keep);                   \
        }                                                                      \
        if (c0 + 2 * VW > k) break; /* a partial group: its rest below */      \
      }                                                                        \
      for (int64_t c = c0 + (k - c0) / L * L; c < k; c++)                     \
        d[c] = (int32_t)sc_drop_draw(key, (uint64_t)c) >= thr ? a[c] * scale : 0.0f; \
    }                                                                          \
  }

// gemm_nn: C rows [r0, r1) = (or +=) M(A)·B, a block of rows at a time
// while the cursor streams the next block into L2. With a mask each block
// is dropped into scratch first; without one the tiles read A where it is.
// Unblocked, with no cursor, a product from memory was far slower than the
// masked one, whose blocks stream.
#define GEMM_NN(SUFFIX, ATTR)                                                  \
  ATTR static void gemm_nn_##SUFFIX(const float *A, const float *B, float *C, int64_t k, int64_t n, \
                                    int64_t r0, int64_t r1, int acc, const sc_mask *m) { \
    const int64_t br = block_rows(k, n);                                       \
    float *buf = m ? scratch_buf(br * k) : NULL;                               \
    for (int64_t r = r0; r < r1; r += br) {                                    \
      const int64_t e = r + br < r1 ? r + br : r1;                             \
      sc_pf pf = next_block(A, NULL, k, e, br, r1);                            \
      if (m) drop_rows_##SUFFIX(A, buf, k, r, e, m, NULL, 0);                  \
      panel_##SUFFIX(m ? buf : A + r * k, k, 1, B, k, C + r * n, e - r, n, acc, narrow_pf(&pf, n)); \
    }                                                                          \
  }

// A weight gradient with a narrow B (n ≤ 32, as G of a GNN's hidden 16) is
// formed transposed, Cᵀ (n×k) = Bᵀ·A: JB of B's values broadcast against KV
// vectors of A's row, so each A vector loaded serves JB FMAs (the tiles
// above load a broadcast per FMA, and read A column-strided). Every
// element is the same chain of FMAs in the same row order, so the result
// is bitwise the same; Cᵀ is kept per thread and transposed into C at the end.
static __thread sc_buf ctb;

static void transpose_into(float *C, const float *ct, int64_t k, int64_t n) {
  for (int64_t q = 0; q < k; q++)
    for (int64_t j = 0; j < n; j++) C[q * n + j] = ct[j * k + q];
}

// TPANEL: ct (n×k) = or += Σ_{t<cnt} b[t·n + j] · a[t·k + q], a packed.
#define TPANEL(SUFFIX, ATTR, JB, KV)                                           \
  ATTR static void tpanel_##SUFFIX(const float *restrict a, const float *restrict b, int64_t cnt, \
                                   float *restrict ct, int64_t k, int64_t n, int acc, sc_pf *pf) { \
    typedef vf_##SUFFIX vf;                                                    \
    enum { NV = NVEC(SUFFIX), L = VW / NVEC(SUFFIX), W = KV * NV };            \
    sc_pf q = pf ? *pf : (sc_pf){0};                                           \
    for (int64_t j0 = 0; j0 < n; j0 += JB)                                     \
      for (int64_t q0 = 0; q0 < k; q0 += KV * VW) {                            \
        vf s[JB][W];                                                           \
        float *c = ct + j0 * k + q0;                                           \
        for (int j = 0; j < JB; j++)                                           \
          for (int v = 0; v < W; v++) s[j][v] = acc ? *(const vf *)(c + j * k + v * L) : (vf){0}; \
        for (int64_t t = 0; t < cnt; t++) {                                    \
          pf_next(&q);                                                         \
          vf av[W];                                                            \
          for (int v = 0; v < W; v++) av[v] = *(const vf *)(a + t * k + q0 + v * L); \
          for (int j = 0; j < JB; j++) {                                       \
            const float x = b[t * n + j0 + j];                                 \
            for (int v = 0; v < W; v++) s[j][v] += x * av[v];                  \
          }                                                                    \
        }                                                                      \
        for (int j = 0; j < JB; j++)                                           \
          for (int v = 0; v < W; v++) *(vf *)(c + j * k + v * L) = s[j][v];    \
      }                                                                        \
    if (pf) *pf = q;                                                           \
  }                                                                            \
  static int transposed_##SUFFIX(int64_t k, int64_t n) {                       \
    return n <= 32 && n % JB == 0 && k % (KV * VW) == 0;                       \
  }

// tn_block adds one packed block of M(A) (cnt×k) times B's rows (cnt×n) to
// C, or to Cᵀ in ct when the shape is formed transposed.
#define TN_BLOCK(SUFFIX, ATTR)                                                 \
  ATTR static void tn_block_##SUFFIX(const float *a, const float *b, int64_t cnt, float *C, \
                                     float *ct, int64_t k, int64_t n, int acc, sc_pf *pf) { \
    if (ct)                                                                    \
      tpanel_##SUFFIX(a, b, cnt, ct, k, n, acc, pf);                           \
    else                                                                       \
      panel_##SUFFIX(a, 1, k, b, cnt, C, k, n, acc, pf);                       \
  }

// gemm_tn: C (k×n) = M(A)ᵀ·B over rows [r0, r1), summed in row order. C's
// rows are A's columns: tiles of MR columns of A against B's row vectors.
#define GEMM_TN(SUFFIX, ATTR)                                                  \
  ATTR static void gemm_tn_##SUFFIX(const float *A, const float *B, float *C, int64_t k, int64_t n, \
                                    int64_t r0, int64_t r1, const sc_mask *m) { \
    /* Without a mask the block is still packed for the MR-column tiles: */  \
    /* they read it column-strided, which streams from memory at half speed. */ \
    const int64_t br = block_rows(k, n);                                       \
    float *ct = transposed_##SUFFIX(k, n) ? grow(&ctb, k * n) : NULL;              \
    float *buf = scratch_buf(br * k);                                          \
    for (int64_t r = r0; r < r1; r += br) {                                    \
      const int64_t e = r + br < r1 ? r + br : r1;                             \
      const float *a = buf;                                                    \
      if (m)                                                                   \
        drop_rows_##SUFFIX(A, buf, k, r, e, m, NULL, 0);                       \
      else if (ct) /* the transposed tile reads rows: A as it is */            \
        a = A + r * k;                                                         \
      else                                                                     \
        memcpy(buf, A + r * k, (size_t)((e - r) * k) * sizeof(float));        \
      sc_pf pf = next_block(A, NULL, k, e, br, r1);                            \
      tn_block_##SUFFIX(a, B + r * n, e - r, C, ct, k, n, r > r0, narrow_pf(&pf, n)); \
    }                                                                          \
    if (ct && r1 > r0)                                                         \
      transpose_into(C, ct, k, n);                                             \
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

#define GEMM_ROWS(SUFFIX, ATTR)                                                \
  /* gather_a is the block of listed rows [r, e) of M(A): dropped into dst  */ \
  /* with a mask, else where they lie if consecutive and a tile may read    */ \
  /* them there (in_place: by rows), else gathered into dst.               */ \
  ATTR static const float *gather_a_##SUFFIX(const float *A, int64_t k, const int32_t *rows, \
      int64_t r, int64_t e, const sc_mask *m, float *dst, int in_place) {      \
    if (m) {                                                                   \
      drop_rows_##SUFFIX(A, dst, k, r, e, m, rows, 0);                         \
      return dst;                                                              \
    }                                                                          \
    const float *run = in_place ? run_of(A, k, rows, r, e) : NULL;             \
    if (run) return run;                                                       \
    gather_rows(A, k, rows + r, e - r, dst);                                   \
    return dst;                                                                \
  }                                                                            \
  ATTR static void gemm_nn_rows_##SUFFIX(const float *A, const float *B, float *C, int64_t k, \
                                         int64_t n, const int32_t *rows, int64_t cnt, \
                                         const sc_mask *m, const float *bias,  \
                                         const sc_mask *then, float *dropped) { \
    const int64_t br = block_rows(k + n, n);                                   \
    float *buf = scratch_buf(br * (k + n));                                    \
    for (int64_t r = 0; r < cnt; r += br) {                                    \
      const int64_t e = r + br < cnt ? r + br : cnt;                           \
      float *out = buf + (e - r) * k;                                          \
      sc_pf pf = next_block(A, rows, k, e, br, cnt);                           \
      const float *a = gather_a_##SUFFIX(A, k, rows, r, e, m, buf, 1);         \
      panel_##SUFFIX(a, k, 1, B, k, out, e - r, n, 0, narrow_pf(&pf, n));      \
      if (!bias) {                                                             \
        scatter_rows(C, n, rows + r, e - r, out);                              \
        continue;                                                              \
      }                                                                        \
      /* Bias and ReLU as the rows are written: cpu.c's bias_relu, in its */ \
      /* (IEEE) mode, so the rows are what it would leave.                */ \
      HONOR_DENORMALS(for (int64_t i = r; i < e; i++) {                        \
        SC_BIAS_RELU(C + (int64_t)rows[i] * n, out + (i - r) * n, bias, n)     \
      });                                                                      \
      /* and, for the next layer, the rows dropped: sc_dropout_rows' rows */  \
      if (then)                                                                \
        HONOR_DENORMALS(drop_rows_##SUFFIX(C, dropped, n, r, e, then, rows, 1)); \
    }                                                                          \
  }                                                                            \
  ATTR static void gemm_tn_rows_##SUFFIX(const float *A, const float *B, float *C, int64_t k, \
                                         int64_t n, const int32_t *rows, int64_t cnt, \
                                         const sc_mask *m) {                   \
    const int64_t br = block_rows(k + n, n);                                   \
    float *ct = transposed_##SUFFIX(k, n) ? grow(&ctb, k * n) : NULL;              \
    float *buf = scratch_buf(br * (k + n));                                    \
    for (int64_t r = 0; r < cnt; r += br) {                                    \
      const int64_t e = r + br < cnt ? r + br : cnt;                           \
      float *bb = buf + (e - r) * k;                                           \
      if (n <= 2 * VW) /* narrow: see narrow_pf */                            \
        prefetch_rows(B, n, rows + e, (e + (e - r) < cnt ? e + (e - r) : cnt) - e); \
      /* A in place only for the transposed tile, which reads it by rows    */ \
      /* (gemm_tn); B's rows in place wherever they are consecutive.        */ \
      const float *a = gather_a_##SUFFIX(A, k, rows, r, e, m, buf, ct != NULL); \
      const float *b = run_of(B, n, rows, r, e);                               \
      if (!b) {                                                                \
        gather_rows(B, n, rows + r, e - r, bb);                                \
        b = bb;                                                                \
      }                                                                        \
      sc_pf pf = next_block(A, rows, k, e, br, cnt);                           \
      tn_block_##SUFFIX(a, b, e - r, C, ct, k, n, r > 0, narrow_pf(&pf, n));   \
    }                                                                          \
    if (ct && cnt > 0)                                                         \
      transpose_into(C, ct, k, n);                                             \
  }

#define DROP_RELU(SUFFIX, ATTR)                                                \
  ATTR static void drop_relu_##SUFFIX(float *g, const float *h, int64_t cols, int64_t r0, \
                                      int64_t r1, const sc_mask *m, float *restrict sums) { \
    const int64_t br = NARROW_SCRATCH / (cols > 0 ? cols : 1) + 1;             \
    if (sums)                                                                  \
      for (int64_t j = 0; j < cols; j++) sums[j] = 0.0f;                       \
    for (int64_t r = r0; r < r1; r += br) {                                    \
      const int64_t e = r + br < r1 ? r + br : r1;                             \
      drop_rows_##SUFFIX(g, g + r * cols, cols, r, e, m, NULL, 0);             \
      for (int64_t i = r * cols; i < e * cols; i++) g[i] = h[i] > 0.0f ? g[i] : 0.0f; \
      if (sums) /* row by row, as sc_column_sums adds them */                  \
        for (int64_t i = r; i < e; i++)                                        \
          for (int64_t j = 0; j < cols; j++) sums[j] += g[i * cols + j];       \
    }                                                                          \
  }

// relu_dropped: rows [r0, r1) of g = g·scale where d > 0, else 0, d being
// the forward's dropped ReLU output M(h): d > 0 exactly where the row's
// draw kept the value and h > 0, so no draw is made again. Column sums as
// drop_relu forms them.
#define RELU_DROPPED(SUFFIX, ATTR)                                             \
  ATTR static void relu_dropped_##SUFFIX(float *restrict g, const float *restrict d, int64_t cols, \
                                         int64_t r0, int64_t r1, float scale, float *restrict sums) { \
    if (sums)                                                                  \
      for (int64_t j = 0; j < cols; j++) sums[j] = 0.0f;                       \
    /* Blocks of rows, summed while still in L1. Each block's product is   */ \
    /* and-ed with a mask, so the loop vectorizes: the compiler will not    */ \
    /* take a product ahead of a select, and as a branch per value it       */ \
    /* mispredicts on half the values.                                      */ \
    const int64_t br = NARROW_SCRATCH / (cols > 0 ? cols : 1) + 1;             \
    for (int64_t r = r0; r < r1; r += br) {                                    \
      const int64_t e = r + br < r1 ? r + br : r1;                             \
      for (int64_t i = r * cols; i < e * cols; i++) {                          \
        const float v = g[i] * scale;                                          \
        uint32_t b;                                                            \
        memcpy(&b, &v, sizeof b);                                              \
        b &= -(uint32_t)(d[i] > 0.0f);                                         \
        memcpy(&g[i], &b, sizeof b);                                           \
      }                                                                        \
      if (sums) /* row by row, as sc_column_sums adds them */                  \
        for (int64_t i = r; i < e; i++)                                        \
          for (int64_t j = 0; j < cols; j++) sums[j] += g[i * cols + j];       \
    }                                                                          \
  }

#define DEFINE_GEMM(SUFFIX, ATTR, MR, JB, KV)                                  \
  TILE(1, SUFFIX, ATTR)                                                        \
  TILE(2, SUFFIX, ATTR)                                                        \
  TILE(4, SUFFIX, ATTR)                                                        \
  TILE(MR, SUFFIX, ATTR)                                                       \
  PANEL(MR, SUFFIX, ATTR)                                                      \
  TPANEL(SUFFIX, ATTR, JB, KV)                                                 \
  TN_BLOCK(SUFFIX, ATTR)                                                       \
  DROP_ROWS(SUFFIX, ATTR)                                                      \
  DROP_RELU(SUFFIX, ATTR)                                                      \
  RELU_DROPPED(SUFFIX, ATTR)                                                   \
  GEMM_NN(SUFFIX, ATTR)                                                        \
  GEMM_TN(SUFFIX, ATTR)                                                        \
  GEMM_ROWS(SUFFIX, ATTR)

// MR·NVEC accumulators cover the FMA latency and leave registers for b;
// the transposed tile's JB·KV·NVEC accumulators leave room for KV·NVEC
// vectors of A and JB broadcasts (16 xmm or ymm, 32 zmm).
DEFINE_GEMM(base, , 3, 2, 1)
#if defined(__x86_64__) && defined(__GNUC__)
DEFINE_GEMM(avx2, SC_AVX2, 6, 2, 2)
DEFINE_GEMM(avx512, SC_AVX512, 12, 4, 4)
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

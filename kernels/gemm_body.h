// The GEMM kernels for one level, included by gemm.c once per level with,
// besides SC_SUFFIX and SC_TARGET (simd.h):
//   SC_MR  the rows of the full register tile
//   SC_JB  the transposed tile's broadcasts of B
//   SC_KV  the transposed tile's vectors of VW floats of A's row

// The register tiles: SC_MR rows, and 4, 2 and 1 for a panel's last rows.
#define SC_TILE_MR 1
#include "gemm_tile_body.h"
#undef SC_TILE_MR
#define SC_TILE_MR 2
#include "gemm_tile_body.h"
#undef SC_TILE_MR
#define SC_TILE_MR 4
#include "gemm_tile_body.h"
#undef SC_TILE_MR
#define SC_TILE_MR SC_MR
#include "gemm_tile_body.h"
#undef SC_TILE_MR

// panel computes rows [0, m) of C (m×n, ldc n) from a, whose row i / count
// t element is a[i·ai + t·as], and b's rows (t·n): full tiles of MR rows,
// then tiles of 4, 2 and 1 (a weight gradient's m is A's width, often
// not a multiple of MR, and one-row tiles alone run far below the rate).
// PANEL_ROWS(R) runs the tiles of R rows, the columns past the last full
// vector as one more tile over bp (edge_pack) into a copy of C's.
#define PANEL_ROWS(R)                                                          \
  for (; i + R <= m; i += R) {                                                 \
    for (int64_t j = 0; j < nv; j += VW)                                       \
      SC_FN(SC_CAT(tile, R))(a + i * ai, ai, as, b + j, n, cnt, c + i * n + j, n, acc, pf); \
    if (nv < n) {                                                              \
      float ct[R * VW];                                                        \
      for (int r = 0; r < R; r++)                                              \
        for (int64_t j = 0; j < VW; j++) ct[r * VW + j] = acc && j < n - nv ? c[(i + r) * n + nv + j] : 0.0f; \
      SC_FN(SC_CAT(tile, R))(a + i * ai, ai, as, bp, VW, cnt, ct, VW, acc, NULL); \
      for (int r = 0; r < R; r++)                                              \
        for (int64_t j = 0; j < n - nv; j++) c[(i + r) * n + nv + j] = ct[r * VW + j]; \
    }                                                                          \
  }
SC_TARGET static void SC_FN(panel)(const float *a, int64_t ai, int64_t as, const float *b, int64_t cnt,
                                   float *c, int64_t m, int64_t n, int acc, sc_pf *pf) {
  const int64_t nv = n / VW * VW;
  const float *bp = nv < n ? edge_pack(b + nv, n, cnt, n - nv) : NULL;
  int64_t i = 0;
  PANEL_ROWS(SC_MR)
  PANEL_ROWS(4)
  PANEL_ROWS(2)
  PANEL_ROWS(1)
}
#undef PANEL_ROWS

// tpanel: ct (n×k) = or += Σ_{t<cnt} b[t·n + j] · a[t·k + q], a packed
// (transpose_into).
SC_TARGET static void SC_FN(tpanel)(const float *restrict a, const float *restrict b, int64_t cnt,
                                    float *restrict ct, int64_t k, int64_t n, int acc, sc_pf *pf) {
  typedef SC_VF vf;
  enum { NV = NVEC, L = VW / NVEC, W = SC_KV * NV };
  sc_pf q = pf ? *pf : (sc_pf){0};
  for (int64_t j0 = 0; j0 < n; j0 += SC_JB)
    for (int64_t q0 = 0; q0 < k; q0 += SC_KV * VW) {
      vf s[SC_JB][W];
      float *c = ct + j0 * k + q0;
      for (int j = 0; j < SC_JB; j++)
        for (int v = 0; v < W; v++) s[j][v] = acc ? *(const vf *)(c + j * k + v * L) : (vf){0};
      for (int64_t t = 0; t < cnt; t++) {
        pf_next(&q);
        vf av[W];
        for (int v = 0; v < W; v++) av[v] = *(const vf *)(a + t * k + q0 + v * L);
        for (int j = 0; j < SC_JB; j++) {
          const float x = b[t * n + j0 + j];
          for (int v = 0; v < W; v++) s[j][v] += x * av[v];
        }
      }
      for (int j = 0; j < SC_JB; j++)
        for (int v = 0; v < W; v++) *(vf *)(c + j * k + v * L) = s[j][v];
    }
  if (pf) *pf = q;
}
// transposed reports whether Aᵀ·B of this shape is formed transposed.
static int SC_FN(transposed)(int64_t k, int64_t n) {
  return n <= 32 && n % SC_JB == 0 && k % (SC_KV * VW) == 0;
}

// tn_block adds one packed block of M(A) (cnt×k) times B's rows (cnt×n) to
// C, or to Cᵀ in ct when the shape is formed transposed.
SC_TARGET static void SC_FN(tn_block)(const float *a, const float *b, int64_t cnt, float *C, float *ct,
                                      int64_t k, int64_t n, int acc, sc_pf *pf) {
  if (ct)
    SC_FN(tpanel)(a, b, cnt, ct, k, n, acc, pf);
  else
    SC_FN(panel)(a, 1, k, b, cnt, C, k, n, acc, pf);
}

#include "drop_rows_body.h"

// gemm_nn: C rows [r0, r1) = (or +=) M(A)·B, a block of rows at a time
// while the cursor streams the next block into L2. With a mask each block
// is dropped into scratch first; without one the tiles read A where it is.
// Unblocked, with no cursor, a product from memory was far slower than the
// masked one, whose blocks stream.
SC_TARGET static void SC_FN(gemm_nn)(const float *A, const float *B, float *C, int64_t k, int64_t n,
                                     int64_t r0, int64_t r1, int acc, const sc_mask *m) {
  const int64_t br = block_rows(k, n);
  float *buf = m ? scratch_buf(br * k) : NULL;
  for (int64_t r = r0; r < r1; r += br) {
    const int64_t e = r + br < r1 ? r + br : r1;
    sc_pf pf = next_block(A, NULL, k, e, br, r1);
    if (m) SC_FN(drop_rows)(A, buf, k, r, e, m, NULL, 0);
    SC_FN(panel)(m ? buf : A + r * k, k, 1, B, k, C + r * n, e - r, n, acc, narrow_pf(&pf, n));
  }
}

// gemm_tn: C (k×n) = M(A)ᵀ·B over rows [r0, r1), summed in row order. C's
// rows are A's columns: tiles of MR columns of A against B's row vectors.
SC_TARGET static void SC_FN(gemm_tn)(const float *A, const float *B, float *C, int64_t k, int64_t n,
                                     int64_t r0, int64_t r1, const sc_mask *m) {
  // Without a mask the block is still packed for the MR-column tiles: they
  // read it column-strided, which streams from memory at half speed.
  const int64_t br = block_rows(k, n);
  float *ct = SC_FN(transposed)(k, n) ? grow(&ctb, k * n) : NULL;
  float *buf = scratch_buf(br * k);
  for (int64_t r = r0; r < r1; r += br) {
    const int64_t e = r + br < r1 ? r + br : r1;
    const float *a = buf;
    if (m)
      SC_FN(drop_rows)(A, buf, k, r, e, m, NULL, 0);
    else if (ct) // the transposed tile reads rows: A as it is
      a = A + r * k;
    else
      memcpy(buf, A + r * k, (size_t)((e - r) * k) * sizeof(float));
    sc_pf pf = next_block(A, NULL, k, e, br, r1);
    SC_FN(tn_block)(a, B + r * n, e - r, C, ct, k, n, r > r0, narrow_pf(&pf, n));
  }
  if (ct && r1 > r0)
    transpose_into(C, ct, k, n);
}

// The products at listed rows (gemm.c: row lists).
// gather_a is the block of listed rows [r, e) of M(A): dropped into dst
// with a mask, else where they lie if consecutive and a tile may read them
// there (in_place: by rows), else gathered into dst.
SC_TARGET static const float *SC_FN(gather_a)(const float *A, int64_t k, const int32_t *rows, int64_t r,
                                              int64_t e, const sc_mask *m, float *dst, int in_place) {
  if (m) {
    SC_FN(drop_rows)(A, dst, k, r, e, m, rows, 0);
    return dst;
  }
  const float *run = in_place ? run_of(A, k, rows, r, e) : NULL;
  if (run) return run;
  gather_rows(A, k, rows + r, e - r, dst);
  return dst;
}

SC_TARGET static void SC_FN(gemm_nn_rows)(const float *A, const float *B, float *C, int64_t k, int64_t n,
                                          const int32_t *rows, int64_t cnt, const sc_mask *m,
                                          const float *bias, const sc_mask *then, float *dropped) {
  const int64_t br = block_rows(k + n, n);
  float *buf = scratch_buf(br * (k + n));
  for (int64_t r = 0; r < cnt; r += br) {
    const int64_t e = r + br < cnt ? r + br : cnt;
    float *out = buf + (e - r) * k;
    sc_pf pf = next_block(A, rows, k, e, br, cnt);
    const float *a = SC_FN(gather_a)(A, k, rows, r, e, m, buf, 1);
    SC_FN(panel)(a, k, 1, B, k, out, e - r, n, 0, narrow_pf(&pf, n));
    if (!bias) {
      scatter_rows(C, n, rows + r, e - r, out);
      continue;
    }
    // Bias and ReLU as the rows are written: cpu.c's bias_relu, in its
    // (IEEE) mode, so the rows are what it would leave.
    HONOR_DENORMALS(for (int64_t i = r; i < e; i++) {
      SC_BIAS_RELU(C + (int64_t)rows[i] * n, out + (i - r) * n, bias, n)
    });
    // and, for the next layer, the rows dropped: sc_dropout_rows' rows
    if (then)
      HONOR_DENORMALS(SC_FN(drop_rows)(C, dropped, n, r, e, then, rows, 1));
  }
}

SC_TARGET static void SC_FN(gemm_tn_rows)(const float *A, const float *B, float *C, int64_t k, int64_t n,
                                          const int32_t *rows, int64_t cnt, const sc_mask *m) {
  const int64_t br = block_rows(k + n, n);
  float *ct = SC_FN(transposed)(k, n) ? grow(&ctb, k * n) : NULL;
  float *buf = scratch_buf(br * (k + n));
  for (int64_t r = 0; r < cnt; r += br) {
    const int64_t e = r + br < cnt ? r + br : cnt;
    float *bb = buf + (e - r) * k;
    if (n <= 2 * VW) // narrow: see narrow_pf
      prefetch_rows(B, n, rows + e, (e + (e - r) < cnt ? e + (e - r) : cnt) - e);
    // A in place only for the transposed tile, which reads it by rows
    // (gemm_tn); B's rows in place wherever they are consecutive.
    const float *a = SC_FN(gather_a)(A, k, rows, r, e, m, buf, ct != NULL);
    const float *b = run_of(B, n, rows, r, e);
    if (!b) {
      gather_rows(B, n, rows + r, e - r, bb);
      b = bb;
    }
    sc_pf pf = next_block(A, rows, k, e, br, cnt);
    SC_FN(tn_block)(a, b, e - r, C, ct, k, n, r > 0, narrow_pf(&pf, n));
  }
  if (ct && cnt > 0)
    transpose_into(C, ct, k, n);
}

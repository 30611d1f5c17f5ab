// GPU kernels of sancus, compiled to PTX by `make cuda` (nvcc -ptx) and
// loaded through the CUDA driver API by backend.go. They mirror the CPU
// kernels in ../cpu.c and ../dropout.c: the same operations, the same
// summation order per output element where it is cheap to keep, and
// bit-identical dropout masks, so CPU and GPU runs give the same losses.
//
// Every reduction is deterministic: partial sums go to fixed slots and are
// added in a fixed order (no atomics), so a GPU run repeats exactly.
#include <stdint.h>

#include "../dropout_rng.h"

typedef long long i64;
typedef uint64_t u64; // the type dropout_rng.h works in

extern "C" {

// C = A·B (or C += A·B): A rows×k CSR, B k×n dense, C rows×n. One thread
// per output element; the n threads of a row read the row's column
// indices together and B's rows coalesced.
__global__ void sc_spmm(const i64 *rowptr, const int *col, const float *val, const float *B,
                        float *C, i64 rows, int n, int acc) {
  i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 r = t / n;
  int c = (int)(t - r * n);
  if (r >= rows) return;
  float s = 0.f;
  for (i64 p = rowptr[r]; p < rowptr[r + 1]; p++) s = fmaf(val[p], B[(i64)col[p] * n + c], s);
  if (acc) C[r * n + c] += s;
  else C[r * n + c] = s;
}

// SpMM for few, long rows (Xᵀ·G in the weight gradient of a sparse input:
// feature rows with thousands of nonzeros). One block per row: 256/n groups
// of n threads take every groups-th nonzero, and the group sums are added in
// group order, so the result is still deterministic.
__global__ void sc_spmm_wide(const i64 *rowptr, const int *col, const float *val, const float *B,
                             float *C, int n, int acc) {
  __shared__ float sh[256];
  i64 r = blockIdx.x;
  int groups = blockDim.x / n;
  int g = threadIdx.x / n, c = threadIdx.x - g * n;
  float s = 0.f;
  if (g < groups)
    for (i64 p = rowptr[r] + g; p < rowptr[r + 1]; p += groups) s = fmaf(val[p], B[(i64)col[p] * n + c], s);
  sh[threadIdx.x] = s;
  __syncthreads();
  if (g == 0) {
    float t = 0.f;
    for (int q = 0; q < groups; q++) t += sh[q * n + c];
    if (acc) C[r * n + c] += t;
    else C[r * n + c] = t;
  }
}

// Dense product through strides, so one tiled kernel serves A·B, A·Bᵀ and
// Aᵀ·B: C[i][j] = Σ_p A(i,p)·B(p,j) with A(i,p) = A[i·sai + p·sap] and
// B(p,j) = B[p·sbp + j·sbj]. blockIdx.z takes the slice [z·kchunk,
// (z+1)·kchunk) of the inner dimension and writes slab z of C (split-K for
// the long inner dimension of a weight gradient; one slab otherwise).
#define TS 16
__global__ void sc_gemm(const float *A, const float *B, float *C, int m, int n, i64 kdim, i64 sai,
                        i64 sap, i64 sbp, i64 sbj, i64 kchunk, int acc) {
  __shared__ float As[TS][TS + 1];
  __shared__ float Bs[TS][TS + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  i64 i = (i64)blockIdx.x * TS + ty;
  int j = blockIdx.y * TS + tx;
  i64 p0 = (i64)blockIdx.z * kchunk;
  i64 p1 = p0 + kchunk < kdim ? p0 + kchunk : kdim;
  float s = 0.f;
  for (i64 p = p0; p < p1; p += TS) {
    i64 ap = p + tx, bp = p + ty;
    As[ty][tx] = (i < m && ap < p1) ? A[i * sai + ap * sap] : 0.f;
    Bs[ty][tx] = (bp < p1 && j < n) ? B[bp * sbp + (i64)j * sbj] : 0.f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < TS; q++) s = fmaf(As[ty][q], Bs[q][tx], s);
    __syncthreads();
  }
  if (i < m && j < n) {
    float *out = C + (i64)blockIdx.z * m * n;
    if (acc) out[i * n + j] += s;
    else out[i * n + j] = s;
  }
}

// out[i] = Σ_z slab[z][i], z in order (the second half of split-K).
__global__ void sc_reduce_slabs(const float *slab, i64 slabs, i64 len, float *out, int acc) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= len) return;
  float s = 0.f;
  for (i64 z = 0; z < slabs; z++) s += slab[z * len + i];
  if (acc) out[i] += s;
  else out[i] = s;
}

// partial[z][c] = Σ over rows [z·chunk, (z+1)·chunk) of g[r][c].
__global__ void sc_colsum(const float *g, i64 rows, int n, i64 chunk, float *partial) {
  i64 r0 = (i64)blockIdx.x * chunk;
  i64 r1 = r0 + chunk < rows ? r0 + chunk : rows;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float s = 0.f;
    for (i64 r = r0; r < r1; r++) s += g[r * n + c];
    partial[(i64)blockIdx.x * n + c] = s;
  }
}

__global__ void sc_bias_relu(float *z, const float *bias, i64 total, int n, int relu) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  float v = z[i] + bias[i % n];
  z[i] = (relu && v < 0.f) ? 0.f : v;
}

__global__ void sc_relu_backward(float *g, const float *h, i64 total) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total && h[i] <= 0.f) g[i] = 0.f;
}

__global__ void sc_scale(float *x, float s, i64 total) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) x[i] *= s;
}

// partial[block] = Σ x² over a grid-stride share, reduced in a fixed tree.
__global__ void sc_sumsq(const float *x, i64 total, double *partial) {
  __shared__ double sh[256];
  double s = 0;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x)
    s += (double)x[i] * (double)x[i];
  sh[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

// a = b + s·c, the STREAM triad: the bandwidth yardstick of the benchmark.
__global__ void sc_triad(float *a, const float *b, const float *c, float s, i64 total) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) a[i] = fmaf(s, c[i], b[i]);
}

// dst[perm[p]] = src[p]: refreshes Aᵀ's values after dropout changed A's.
__global__ void sc_permute(const float *src, float *dst, const i64 *perm, i64 total) {
  i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (p < total) dst[perm[p]] = src[p];
}

// Dropout masks, exactly as ../gemm.c and ../dropout.c draw them (the draws
// are shared: ../dropout_rng.h).
__device__ __forceinline__ float keep_or_zero(unsigned lane, unsigned thr, float v, float scale) {
  return lane >= thr ? v * scale : 0.f;
}

// One thread per (row, four columns): every column's draw is a hash of the
// row key and the column (../dropout_rng.h), nothing replayed.
__global__ void sc_dropout_dense(const float *src, float *dst, i64 rows, int cols, u64 seed,
                                 u64 stream, i64 row0, const i64 *ids, unsigned thr, float scale) {
  int quads = (cols + 3) / 4;
  i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 r = t / quads;
  int q = (int)(t - r * quads);
  if (r >= rows) return;
  const uint32_t key = sc_drop_key(seed, stream, (u64)(ids ? ids[r] : row0 + r));
  unsigned t16 = thr > 0xffff ? 0xffff : thr;
  for (int l = 0; l < 4; l++) {
    int c = 4 * q + l;
    if (c >= cols) break;
    dst[r * cols + c] = keep_or_zero(sc_drop_draw(key, (u64)c), t16, src[r * cols + c], scale);
  }
}

// Sparse rows: one thread per row.
__global__ void sc_dropout_csr(const i64 *rowptr, const int *col, const float *val, float *out,
                               i64 rows, u64 seed, u64 stream, i64 row0, const i64 *ids,
                               unsigned thr, float scale) {
  i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const uint32_t key = sc_drop_key(seed, stream, (u64)(ids ? ids[r] : row0 + r));
  for (i64 p = rowptr[r]; p < rowptr[r + 1]; p++)
    out[p] = keep_or_zero(sc_drop_draw(key, (u64)col[p]), thr, val[p], scale);
}

// Softmax cross-entropy, one thread per listed row, in double as on the CPU
// (../loss.go): the row's loss goes to loss[t], added on the host in list
// order, and its gradient row to grad (rows not listed stay zero).
__global__ void sc_softmax_ce(const float *z, int c, const int *labels, const int *rows, i64 nrows,
                              double norm, float *grad, double *loss) {
  i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= nrows) return;
  i64 r = rows[t];
  const float *row = z + r * c;
  double mx = __longlong_as_double(0xfff0000000000000LL); // -inf
  for (int k = 0; k < c; k++) mx = fmax(mx, (double)row[k]);
  double s = 0;
  for (int k = 0; k < c; k++) s += exp((double)row[k] - mx);
  int y = labels[r];
  loss[t] = -((double)row[y] - mx - log(s));
  float *g = grad + r * c;
  for (int k = 0; k < c; k++) {
    double q = exp((double)row[k] - mx) / s;
    if (k == y) q -= 1;
    g[k] = (float)(q / norm);
  }
}

// The kernels below are optional to the backend (driver.c): a module
// without them (an older PTX) runs their operations on host copies.

// sc_spmm for widths a multiple of 4: each thread a float4 of a row's
// columns (16-byte loads of B's gathered rows), the same fmaf order per
// element as sc_spmm, so the same bits. The loop is unrolled so that
// several gathered rows are in flight at once: each waits on memory, not
// on the one before.
__global__ void sc_spmm4(const i64 *__restrict__ rowptr, const int *__restrict__ col,
                         const float *__restrict__ val, const float4 *__restrict__ B,
                         float4 *__restrict__ C, i64 rows, int q, int acc) {
  i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 r = t / q;
  int c = (int)(t - r * q);
  if (r >= rows) return;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  const i64 p1 = rowptr[r + 1];
#pragma unroll 4
  for (i64 p = rowptr[r]; p < p1; p++) {
    const float v = val[p];
    const float4 b = __ldg(&B[(i64)col[p] * q + c]);
    s.x = fmaf(v, b.x, s.x);
    s.y = fmaf(v, b.y, s.y);
    s.z = fmaf(v, b.z, s.z);
    s.w = fmaf(v, b.w, s.w);
  }
  float4 *o = &C[r * q + c];
  if (acc) {
    float4 w = *o;
    w.x += s.x;
    w.y += s.y;
    w.z += s.z;
    w.w += s.w;
    *o = w;
  } else {
    *o = s;
  }
}

// GAT's activation in place: e^x − 1 where x < 0.
__global__ void sc_elu(float *z, i64 total) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total && z[i] < 0.f) z[i] = expf(z[i]) - 1.f;
}

// ELU's backward read off its output h: g·(h + 1) where h ≤ 0.
__global__ void sc_elu_backward(float *g, const float *h, i64 total) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total && h[i] <= 0.f) g[i] *= h[i] + 1.f;
}

// a += b (GraphSAGE's root path).
__global__ void sc_add(float *a, const float *b, i64 total) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < total) a[i] += b[i];
}

// dst row r = src row r · s[r] for the first rows rows (D⁻¹ on a gradient).
__global__ void sc_scale_rows(float *dst, const float *src, const float *s, i64 rows, int n) {
  i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * n) dst[i] = src[i] * s[i / n];
}

// sc_gemm for wide products (m and n at least 64): a 64×64 tile of C per
// block of 16×16 threads, each thread 4×4 of it (rows ty + 16r, columns
// tx + 16c), so every value loaded from shared memory feeds four products.
// The strides are sc_gemm's, each tile loaded along whichever of its
// dimensions is contiguous; every element sums the same products in the
// same order as sc_gemm, so the two give the same bits.
#define G64 64
#define GK 16
__global__ void sc_gemm64(const float *A, const float *B, float *C, int m, int n, i64 kdim, i64 sai,
                          i64 sap, i64 sbp, i64 sbj, i64 kchunk, int acc) {
  __shared__ float As[GK][G64 + 4];
  __shared__ float Bs[GK][G64 + 4];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const i64 i0 = (i64)blockIdx.x * G64;
  const int j0 = blockIdx.y * G64;
  const i64 p0 = (i64)blockIdx.z * kchunk;
  const i64 p1 = p0 + kchunk < kdim ? p0 + kchunk : kdim;
  float s[4][4];
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int c = 0; c < 4; c++) s[r][c] = 0.f;
  for (i64 p = p0; p < p1; p += GK) {
    for (int e = tid; e < G64 * GK; e += 256) {
      int ii, pp;
      if (sap == 1) {
        pp = e % GK;
        ii = e / GK;
      } else {
        ii = e % G64;
        pp = e / G64;
      }
      const i64 i = i0 + ii, q = p + pp;
      As[pp][ii] = (i < m && q < p1) ? A[i * sai + q * sap] : 0.f;
    }
    for (int e = tid; e < G64 * GK; e += 256) {
      int jj, pp;
      if (sbj == 1) {
        jj = e % G64;
        pp = e / G64;
      } else {
        pp = e % GK;
        jj = e / GK;
      }
      const i64 q = p + pp;
      const int j = j0 + jj;
      Bs[pp][jj] = (q < p1 && j < n) ? B[q * sbp + (i64)j * sbj] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < GK; q++) {
      float a[4], b[4];
#pragma unroll
      for (int r = 0; r < 4; r++) a[r] = As[q][ty + 16 * r];
#pragma unroll
      for (int c = 0; c < 4; c++) b[c] = Bs[q][tx + 16 * c];
#pragma unroll
      for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) s[r][c] = fmaf(a[r], b[c], s[r][c]);
    }
    __syncthreads();
  }
  float *out = C + (i64)blockIdx.z * m * n;
#pragma unroll
  for (int r = 0; r < 4; r++) {
    const i64 i = i0 + ty + 16 * r;
    if (i >= m) continue;
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const int j = j0 + tx + 16 * c;
      if (j >= n) continue;
      if (acc) out[i * n + j] += s[r][c];
      else out[i * n + j] = s[r][c];
    }
  }
}

// GAT's attention (../gat.c has the CPU's, src/train/gat.go the math).
// Threads own output elements, so no two write the same word and every
// sum runs in a fixed order: a target row's softmax takes two passes over
// its edges in a block, the first for the block's maximum per head (one
// thread per row and head, which rescales what was summed before), the
// second for the sums (one thread per row and output column). Products
// the CPU forms without a fused multiply-add are formed so here too.
#define GAT_GOLDEN 0x9e3779b97f4a7c15ULL

__device__ __forceinline__ float gat_leaky(float x) { return x < 0.f ? 0.2f * x : x; }
__device__ __forceinline__ float gat_slope(float x) { return x < 0.f ? 0.2f : 1.f; }
__device__ __forceinline__ i64 gat_id(const i64 *ids, i64 row0, i64 r) { return ids ? ids[r] : row0 + r; }

// gat_drop is head k's dropout scale of edge (target, source): gat.c's
// edge_scales, 16-bit draws four heads to a hash (key 0: no dropout).
__device__ __forceinline__ float gat_drop(u64 key, i64 target, i64 source, int k, unsigned thr, float scale) {
  if (!key) return 1.f;
  const u64 edge = sc_mix64((key ^ (u64)target) ^ sc_mix64((u64)source + GAT_GOLDEN));
  const u64 z = sc_mix64(edge ^ (u64)(k >> 2));
  return (unsigned)(z >> (16 * (k & 3)) & 0xffff) < thr ? 0.f : scale;
}

__device__ __forceinline__ float gat_dot(const float *a, const float *b, int n) {
  float s = 0.f;
  for (int i = 0; i < n; i++) s = __fadd_rn(s, __fmul_rn(a[i], b[i]));
  return s;
}

// pay row i = [u_i | a_r·u_i per head]; el_i = a_l·u_i (el null: not).
// One thread per (row, payload column).
__global__ void sc_gat_payload(const float *u, const float *al, const float *ar, float *pay, float *el,
                               i64 rows, int h, int f) {
  const int hf = h * f, w = hf + h;
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 i = t / w;
  const int j = (int)(t - i * w);
  if (i >= rows) return;
  const float *ui = u + i * hf;
  if (j < hf) {
    pay[i * w + j] = ui[j];
    return;
  }
  const int k = j - hf;
  pay[i * w + j] = gat_dot(ar + k * f, ui + k * f, f);
  if (el) el[i * h + k] = gat_dot(al + k * f, ui + k * f, f);
}

// Empty softmax state before a layer's first block (o2, c null: not kept).
__global__ void sc_gat_start(float *m, float *s, float *c, float *o, float *o2, i64 rows, int h, int hf) {
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows * hf) return;
  o[t] = 0.f;
  if (o2) o2[t] = 0.f;
  const i64 i = t / hf;
  const int j = (int)(t - i * hf);
  if (j < h) {
    m[i * h + j] = __int_as_float(0xff800000); // -inf
    s[i * h + j] = 0.f;
    if (c) c[i * h + j] = 0.f;
  }
}

// The block's largest score per (target row, head): where it beats the
// running maximum, what was summed so far is rescaled to it.
__global__ void sc_gat_max(const i64 *rowptr, const int *col, const float *src, int h, int f,
                           const float *el, float *m, float *s, float *o, float *o2, float *c, i64 rows) {
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 i = t / h;
  const int k = (int)(t - i * h);
  if (i >= rows) return;
  const int hf = h * f, w = hf + h;
  const float e = el[i * h + k];
  float cm = __int_as_float(0xff800000);
  for (i64 p = rowptr[i]; p < rowptr[i + 1]; p++) cm = fmaxf(cm, gat_leaky(e + src[(i64)col[p] * w + hf + k]));
  const i64 ik = i * h + k;
  if (!(cm > m[ik])) return;
  const float sc = expf(m[ik] - cm);
  s[ik] *= sc;
  for (int x = 0; x < f; x++) o[i * hf + k * f + x] *= sc;
  if (o2) {
    c[ik] *= sc;
    for (int x = 0; x < f; x++) o2[i * hf + k * f + x] *= sc;
  }
  m[ik] = cm;
}

// The block's terms of target row i's sums at the maximum sc_gat_max left:
// output column j (head j/f); the head's first column also sums s and c.
__global__ void sc_gat_attend(const i64 *rowptr, const int *col, const float *src, int h, int f,
                              const float *el, const float *m, float *s, float *o, float *o2, float *c,
                              i64 rows, u64 key, unsigned thr, float scale, const i64 *tids, i64 trow0,
                              const i64 *sids, i64 srow0) {
  const int hf = h * f, w = hf + h;
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 i = t / hf;
  const int j = (int)(t - i * hf), k = j / f;
  if (i >= rows) return;
  const i64 ik = i * h + k, target = key ? gat_id(tids, trow0, i) : 0;
  const float e = el[ik], mi = m[ik];
  float so = 0.f, so2 = 0.f, ss = 0.f, sc = 0.f;
  for (i64 p = rowptr[i]; p < rowptr[i + 1]; p++) {
    const float *row = src + (i64)col[p] * w;
    const float v = e + row[hf + k], x = expf(gat_leaky(v) - mi), sl = gat_slope(v);
    const float a = x * gat_drop(key, target, key ? gat_id(sids, srow0, col[p]) : 0, k, thr, scale);
    so += a * row[j];
    ss += x;
    if (o2) {
      so2 += (a * sl) * row[j];
      sc += x * sl;
    }
  }
  o[i * hf + j] += so;
  if (o2) o2[i * hf + j] += so2;
  if (j == k * f) {
    s[ik] += ss;
    if (o2) c[ik] += sc;
  }
}

// Each head's output over its sum, in place; concat copies it into z.
__global__ void sc_gat_norm(float *o, const float *s, float *z, i64 rows, int h, int f, int concat) {
  const int hf = h * f;
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows * hf) return;
  const i64 i = t / hf;
  const int j = (int)(t - i * hf);
  const float sk = s[i * h + j / f];
  float v = o[t];
  if (sk > 0.f) o[t] = v = v * (1.f / sk);
  if (concat) z[t] = v;
}

// The last layer's mean of its normalized heads: one thread per (row, x).
__global__ void sc_gat_mean(const float *o, float *z, i64 rows, int h, int f) {
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows * f) return;
  const i64 i = t / f;
  const int x = (int)(t - i * f);
  float v = 0.f;
  for (int k = 0; k < h; k++) v += o[i * h * f + k * f + x];
  z[t] = v * (1.f / (float)h);
}

// The gradient rows [G | el | lse | δ] and the target side ∂el, one thread
// per (row, head).
__global__ void sc_gat_grad_rows(float *gpay, float *dEl, const float *g, const float *el, const float *m,
                                 const float *s, const float *o, const float *o2, const float *c, i64 rows,
                                 int h, int f, int dout, int concat) {
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 i = t / h;
  const int k = (int)(t - i * h);
  if (i >= rows) return;
  const int hf = h * f, gw = hf + 3 * h;
  float *gk = gpay + i * gw + k * f;
  const float inv = 1.f / (float)h;
  for (int x = 0; x < f; x++) gk[x] = concat ? g[i * dout + k * f + x] : g[i * dout + x] * inv;
  const i64 ik = i * h + k, seg = i * hf + k * f;
  const float sk = s[ik];
  const float lse = sk > 0.f ? m[ik] + (float)log((double)sk) : __int_as_float(0xff800000);
  const float delta = gat_dot(gk, o + seg, f);
  gpay[i * gw + hf + k] = el[ik];
  gpay[i * gw + hf + h + k] = lse;
  gpay[i * gw + hf + 2 * h + k] = delta;
  dEl[ik] = sk > 0.f ? __fsub_rn(gat_dot(gk, o2 + seg, f), __fmul_rn(delta, c[ik])) / sk : 0.f;
}

// The neighbour side's ∂U: for source row r (own: [U | er] as the targets
// used it) and column j, Σ over its targets (src: their gradient rows) of
// d·α·G. One thread per (row, column).
__global__ void sc_gat_neighbour_u(const i64 *rowptr, const int *col, const float *src, int h, int f,
                                   const float *own, float *dU, i64 rows, u64 key, unsigned thr, float scale,
                                   const i64 *oids, i64 orow0, const i64 *tids, i64 trow0) {
  const int hf = h * f, w = hf + h, gw = hf + 3 * h;
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 r = t / hf;
  const int j = (int)(t - r * hf), k = j / f;
  if (r >= rows) return;
  const float er = own[r * w + hf + k];
  const i64 source = key ? gat_id(oids, orow0, r) : 0;
  float acc = 0.f;
  for (i64 p = rowptr[r]; p < rowptr[r + 1]; p++) {
    const float *g = src + (i64)col[p] * gw;
    const float a = expf(gat_leaky(g[hf + k] + er) - g[hf + h + k]);
    acc += gat_drop(key, key ? gat_id(tids, trow0, col[p]) : 0, source, k, thr, scale) * a * g[j];
  }
  dU[r * hf + j] += acc;
}

// The neighbour side's ∂er: Σ over row r's targets of ∂s, one thread per
// (row, head), each term as gat.c forms it.
__global__ void sc_gat_neighbour_er(const i64 *rowptr, const int *col, const float *src, int h, int f,
                                    const float *own, float *dEr, i64 rows, u64 key, unsigned thr, float scale,
                                    const i64 *oids, i64 orow0, const i64 *tids, i64 trow0) {
  const int hf = h * f, w = hf + h, gw = hf + 3 * h;
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 r = t / h;
  const int k = (int)(t - r * h);
  if (r >= rows) return;
  const float *ur = own + r * w;
  const i64 source = key ? gat_id(oids, orow0, r) : 0;
  float acc = 0.f;
  for (i64 p = rowptr[r]; p < rowptr[r + 1]; p++) {
    const float *g = src + (i64)col[p] * gw;
    const float v = g[hf + k] + ur[hf + k], a = expf(gat_leaky(v) - g[hf + h + k]);
    const float d = gat_drop(key, key ? gat_id(tids, trow0, col[p]) : 0, source, k, thr, scale);
    const float gu = d * gat_dot(g + k * f, ur + k * f, f);
    acc += a * (gu - g[hf + 2 * h + k]) * gat_slope(v);
  }
  dEr[r * h + k] += acc;
}

// The scores' gradients into ∂U: du += ∂el·a_l, then += ∂er·a_r.
__global__ void sc_gat_score_u(float *dU, const float *dEl, const float *dEr, const float *al,
                               const float *ar, i64 rows, int h, int f) {
  const int hf = h * f;
  const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows * hf) return;
  const i64 i = t / hf;
  const int j = (int)(t - i * hf);
  const i64 ik = i * h + j / f;
  float v = dU[t];
  v = __fadd_rn(v, __fmul_rn(dEl[ik], al[j]));
  dU[t] = __fadd_rn(v, __fmul_rn(dEr[ik], ar[j]));
}

// The attention vectors' gradients by slices of rows: partial[z][j] =
// Σ ∂el·u and partial[chunks + z][j] = Σ ∂er·own's u over slice z, added
// in slice order by sc_reduce_slabs.
__global__ void sc_gat_score_vec(const float *dEl, const float *dEr, const float *u, const float *own,
                                 i64 rows, int h, int f, i64 chunk, float *partial) {
  const int hf = h * f, w = hf + h;
  const i64 r0 = (i64)blockIdx.x * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
  for (int j = threadIdx.x; j < hf; j += blockDim.x) {
    const int k = j / f;
    float sl = 0.f, sr = 0.f;
    for (i64 i = r0; i < r1; i++) {
      sl = __fadd_rn(sl, __fmul_rn(dEl[i * h + k], u[i * hf + j]));
      sr = __fadd_rn(sr, __fmul_rn(dEr[i * h + k], own[i * w + j]));
    }
    partial[(i64)blockIdx.x * hf + j] = sl;
    partial[((i64)gridDim.x + blockIdx.x) * hf + j] = sr;
  }
}

} // extern "C"

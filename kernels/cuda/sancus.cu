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
// element as sc_spmm, so the same bits.
__global__ void sc_spmm4(const i64 *rowptr, const int *col, const float *val, const float4 *B,
                         float4 *C, i64 rows, int q, int acc) {
  i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 r = t / q;
  int c = (int)(t - r * q);
  if (r >= rows) return;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  for (i64 p = rowptr[r]; p < rowptr[r + 1]; p++) {
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

} // extern "C"

//go:build cuda

#include "driver.h"

static const char *names[SCG_NKERNELS] = {
    "sc_spmm", "sc_gemm", "sc_reduce_slabs", "sc_colsum", "sc_bias_relu", "sc_relu_backward",
    "sc_scale", "sc_sumsq", "sc_triad", "sc_permute", "sc_dropout_dense", "sc_dropout_csr",
    "sc_softmax_ce", "sc_spmm_wide", "sc_spmm4", "sc_elu", "sc_elu_backward", "sc_add",
    "sc_scale_rows", "sc_gemm64", "sc_gat_payload", "sc_gat_start", "sc_gat_max", "sc_gat_attend",
    "sc_gat_norm", "sc_gat_mean", "sc_gat_grad_rows", "sc_gat_neighbour_u", "sc_gat_neighbour_er",
    "sc_gat_score_u", "sc_gat_score_vec"};

int scg_device_count(int *n) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return r;
  return cuDeviceGetCount(n);
}

// The primary context is shared by every backend of the process (in-process
// ranks on one GPU); each backend has its own stream and module.
int scg_open(scg *g, int ordinal, const char *ptx, char *name, int namelen, size_t *totalmem) {
  CUresult r;
  if ((r = cuInit(0))) return r;
  if ((r = cuDeviceGet(&g->dev, ordinal))) return r;
  if ((r = cuDeviceGetName(name, namelen, g->dev))) return r;
  if ((r = cuDeviceTotalMem(totalmem, g->dev))) return r;
  if ((r = cuDevicePrimaryCtxRetain(&g->ctx, g->dev))) return r;
  if ((r = cuCtxSetCurrent(g->ctx))) return r;
  if ((r = cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING))) return r;
  if ((r = cuModuleLoadData(&g->mod, ptx))) return r;
  for (int k = 0; k < SCG_NKERNELS; k++) {
    r = cuModuleGetFunction(&g->fn[k], g->mod, names[k]);
    if (r == CUDA_ERROR_NOT_FOUND && k >= SCG_NREQUIRED) {
      g->fn[k] = 0;
      continue;
    }
    if (r) return r;
  }
  return CUDA_SUCCESS;
}

int scg_close(scg *g) {
  CUresult r;
  if ((r = cuCtxSetCurrent(g->ctx))) return r;
  cuStreamSynchronize(g->stream);
  if (g->mod) cuModuleUnload(g->mod);
  if (g->stream) cuStreamDestroy(g->stream);
  return cuDevicePrimaryCtxRelease(g->dev);
}

const char *scg_error(int code) {
  const char *s = 0;
  if (cuGetErrorName((CUresult)code, &s) != CUDA_SUCCESS || !s) return "unknown CUDA error";
  return s;
}

int scg_has(scg *g, int k) { return g->fn[k] != 0; }

// Goroutines move between threads: every entry makes the context current.
#define CUR(g)                                 \
  do {                                         \
    CUresult _r = cuCtxSetCurrent((g)->ctx);   \
    if (_r != CUDA_SUCCESS) return _r;         \
  } while (0)

int scg_alloc(scg *g, scg_ptr *p, size_t bytes) {
  CUR(g);
  CUdeviceptr d = 0;
  CUresult r = cuMemAlloc(&d, bytes ? bytes : 4);
  *p = (scg_ptr)d;
  return r;
}

int scg_free(scg *g, scg_ptr p) {
  CUR(g);
  return cuMemFree((CUdeviceptr)p);
}

// Host copies finish before returning, so Go memory is never held by CUDA
// after the call.
int scg_upload(scg *g, scg_ptr dst, const void *src, size_t bytes) {
  CUR(g);
  if (!bytes) return CUDA_SUCCESS;
  CUresult r = cuMemcpyHtoDAsync((CUdeviceptr)dst, src, bytes, g->stream);
  if (r != CUDA_SUCCESS) return r;
  return cuStreamSynchronize(g->stream);
}

int scg_download(scg *g, void *dst, scg_ptr src, size_t bytes) {
  CUR(g);
  if (!bytes) return CUDA_SUCCESS;
  CUresult r = cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, bytes, g->stream);
  if (r != CUDA_SUCCESS) return r;
  return cuStreamSynchronize(g->stream);
}

int scg_copy(scg *g, scg_ptr dst, scg_ptr src, size_t bytes) {
  CUR(g);
  if (!bytes || g->failed) return CUDA_SUCCESS;
  return cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, g->stream);
}

int scg_zero(scg *g, scg_ptr p, size_t words) {
  CUR(g);
  if (!words || g->failed) return CUDA_SUCCESS;
  return cuMemsetD32Async((CUdeviceptr)p, 0, words, g->stream);
}

int scg_sync(scg *g) {
  CUR(g);
  return cuStreamSynchronize(g->stream);
}

static int launch(scg *g, int k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                  void **args) {
  CUR(g);
  if (gx == 0 || gy == 0 || gz == 0 || g->failed) return CUDA_SUCCESS;
  return cuLaunchKernel(g->fn[k], gx, gy, gz, bx, by, 1, 0, g->stream, args, 0);
}

static unsigned blocks(long long total, unsigned per) { return (unsigned)((total + per - 1) / per); }

int scg_spmm(scg *g, scg_ptr rowptr, scg_ptr col, scg_ptr val, scg_ptr b, scg_ptr c,
             long long rows, int n, int acc) {
  void *a[] = {&rowptr, &col, &val, &b, &c, &rows, &n, &acc};
  return launch(g, SCG_SPMM, blocks(rows * n, 256), 1, 1, 256, 1, a);
}

int scg_gemm(scg *g, scg_ptr pa, scg_ptr pb, scg_ptr pc, int m, int n, long long kdim,
             long long sai, long long sap, long long sbp, long long sbj, long long kchunk,
             int slabs, int acc) {
  void *a[] = {&pa, &pb, &pc, &m, &n, &kdim, &sai, &sap, &sbp, &sbj, &kchunk, &acc};
  /* wide products take the 4×4-per-thread tiles (the same sums, fewer loads) */
  if (g->fn[SCG_GEMM64] && m >= 64 && n >= 64)
    return launch(g, SCG_GEMM64, blocks(m, 64), blocks(n, 64), (unsigned)slabs, 16, 16, a);
  return launch(g, SCG_GEMM, blocks(m, 16), blocks(n, 16), (unsigned)slabs, 16, 16, a);
}

int scg_reduce(scg *g, scg_ptr slab, long long slabs, long long len, scg_ptr out, int acc) {
  void *a[] = {&slab, &slabs, &len, &out, &acc};
  return launch(g, SCG_REDUCE, blocks(len, 256), 1, 1, 256, 1, a);
}

int scg_colsum(scg *g, scg_ptr x, long long rows, int n, long long chunk, int chunks, scg_ptr partial) {
  void *a[] = {&x, &rows, &n, &chunk, &partial};
  return launch(g, SCG_COLSUM, (unsigned)chunks, 1, 1, 128, 1, a);
}

int scg_bias_relu(scg *g, scg_ptr z, scg_ptr bias, long long total, int n, int relu) {
  void *a[] = {&z, &bias, &total, &n, &relu};
  return launch(g, SCG_BIAS_RELU, blocks(total, 256), 1, 1, 256, 1, a);
}

int scg_relu_backward(scg *g, scg_ptr grad, scg_ptr h, long long total) {
  void *a[] = {&grad, &h, &total};
  return launch(g, SCG_RELU_BWD, blocks(total, 256), 1, 1, 256, 1, a);
}

int scg_scale(scg *g, scg_ptr x, float s, long long total) {
  void *a[] = {&x, &s, &total};
  return launch(g, SCG_SCALE, blocks(total, 256), 1, 1, 256, 1, a);
}

int scg_sumsq(scg *g, scg_ptr x, long long total, int nblocks, scg_ptr partial) {
  void *a[] = {&x, &total, &partial};
  return launch(g, SCG_SUMSQ, (unsigned)nblocks, 1, 1, 256, 1, a);
}

int scg_triad(scg *g, scg_ptr pa, scg_ptr pb, scg_ptr pc, float s, long long total) {
  void *a[] = {&pa, &pb, &pc, &s, &total};
  return launch(g, SCG_TRIAD, blocks(total, 256), 1, 1, 256, 1, a);
}

int scg_permute(scg *g, scg_ptr src, scg_ptr dst, scg_ptr perm, long long total) {
  void *a[] = {&src, &dst, &perm, &total};
  return launch(g, SCG_PERMUTE, blocks(total, 256), 1, 1, 256, 1, a);
}

int scg_dropout_dense(scg *g, scg_ptr src, scg_ptr dst, long long rows, int cols,
                      unsigned long long seed, unsigned long long stream, long long row0,
                      scg_ptr ids, unsigned thr, float scale) {
  void *a[] = {&src, &dst, &rows, &cols, &seed, &stream, &row0, &ids, &thr, &scale};
  return launch(g, SCG_DROP_DENSE, blocks(rows * ((cols + 3) / 4), 256), 1, 1, 256, 1, a);
}

int scg_dropout_csr(scg *g, scg_ptr rowptr, scg_ptr col, scg_ptr val, scg_ptr out, long long rows,
                    unsigned long long seed, unsigned long long stream, long long row0,
                    scg_ptr ids, unsigned thr, float scale) {
  void *a[] = {&rowptr, &col, &val, &out, &rows, &seed, &stream, &row0, &ids, &thr, &scale};
  return launch(g, SCG_DROP_CSR, blocks(rows, 128), 1, 1, 128, 1, a);
}

int scg_softmax_ce(scg *g, scg_ptr z, int c, scg_ptr labels, scg_ptr rows, long long nrows,
                   double norm, scg_ptr grad, scg_ptr loss) {
  void *a[] = {&z, &c, &labels, &rows, &nrows, &norm, &grad, &loss};
  return launch(g, SCG_SOFTMAX_CE, blocks(nrows, 128), 1, 1, 128, 1, a);
}

int scg_spmm_wide(scg *g, scg_ptr rowptr, scg_ptr col, scg_ptr val, scg_ptr b, scg_ptr c,
                  long long rows, int n, int acc) {
  void *a[] = {&rowptr, &col, &val, &b, &c, &n, &acc};
  unsigned threads = 256 / (unsigned)n * (unsigned)n; /* whole groups only */
  return launch(g, SCG_SPMM_WIDE, (unsigned)rows, 1, 1, threads, 1, a);
}

int scg_spmm4(scg *g, scg_ptr rowptr, scg_ptr col, scg_ptr val, scg_ptr b, scg_ptr c,
              long long rows, int n, int acc) {
  int q = n / 4;
  void *a[] = {&rowptr, &col, &val, &b, &c, &rows, &q, &acc};
  return launch(g, SCG_SPMM4, blocks(rows * q, 256), 1, 1, 256, 1, a);
}

static int elementwise(scg *g, int k, void **args, long long total) {
  return launch(g, k, blocks(total, 256), 1, 1, 256, 1, args);
}

int scg_elu(scg *g, scg_ptr z, long long total) {
  void *a[] = {&z, &total};
  return elementwise(g, SCG_ELU, a, total);
}

int scg_elu_backward(scg *g, scg_ptr grad, scg_ptr h, long long total) {
  void *a[] = {&grad, &h, &total};
  return elementwise(g, SCG_ELU_BWD, a, total);
}

int scg_add(scg *g, scg_ptr pa, scg_ptr pb, long long total) {
  void *a[] = {&pa, &pb, &total};
  return elementwise(g, SCG_ADD, a, total);
}

int scg_scale_rows(scg *g, scg_ptr dst, scg_ptr src, scg_ptr s, long long rows, int n) {
  void *a[] = {&dst, &src, &s, &rows, &n};
  return elementwise(g, SCG_SCALE_ROWS, a, rows * n);
}

int scg_gat_payload(scg *g, scg_ptr u, scg_ptr al, scg_ptr ar, scg_ptr pay, scg_ptr el,
                    long long rows, int h, int f) {
  void *a[] = {&u, &al, &ar, &pay, &el, &rows, &h, &f};
  return elementwise(g, SCG_GAT_PAYLOAD, a, rows * (h * f + h));
}

int scg_gat_start(scg *g, scg_ptr m, scg_ptr s, scg_ptr c, scg_ptr o, scg_ptr o2, long long rows,
                  int h, int hf) {
  void *a[] = {&m, &s, &c, &o, &o2, &rows, &h, &hf};
  return elementwise(g, SCG_GAT_START, a, rows * hf);
}

/* drop is gat.c's drop_of: the threshold of a 16-bit draw and 1/keep. */
static void drop(const scg_gat_block *b, unsigned *thr, float *scale) {
  *thr = (unsigned)((1.0f - b->keep) * 65536.0f + 0.5f);
  *scale = 1.0f / b->keep;
}

int scg_gat_attend(scg *g, const scg_gat_block *b, scg_ptr src, scg_ptr el, scg_ptr m, scg_ptr s,
                   scg_ptr o, scg_ptr o2, scg_ptr c) {
  scg_gat_block k = *b;
  unsigned thr;
  float scale;
  drop(b, &thr, &scale);
  void *mx[] = {&k.rowptr, &k.col, &src, &k.h, &k.f, &el, &m, &s, &o, &o2, &c, &k.rows};
  int r = elementwise(g, SCG_GAT_MAX, mx, k.rows * k.h);
  if (r) return r;
  void *at[] = {&k.rowptr, &k.col, &src, &k.h, &k.f, &el, &m, &s, &o, &o2, &c, &k.rows, &k.key, &thr,
                &scale, &k.rowids, &k.row0, &k.colids, &k.col0};
  return elementwise(g, SCG_GAT_ATTEND, at, k.rows * k.h * k.f);
}

int scg_gat_finish(scg *g, scg_ptr o, scg_ptr s, scg_ptr z, long long rows, int h, int f, int concat) {
  void *a[] = {&o, &s, &z, &rows, &h, &f, &concat};
  int r = elementwise(g, SCG_GAT_NORM, a, rows * h * f);
  if (r || concat) return r;
  void *mn[] = {&o, &z, &rows, &h, &f};
  return elementwise(g, SCG_GAT_MEAN, mn, rows * f);
}

int scg_gat_grad_rows(scg *g, scg_ptr gpay, scg_ptr dEl, scg_ptr grad, scg_ptr el, scg_ptr m,
                      scg_ptr s, scg_ptr o, scg_ptr o2, scg_ptr c, long long rows, int h, int f,
                      int dout, int concat) {
  void *a[] = {&gpay, &dEl, &grad, &el, &m, &s, &o, &o2, &c, &rows, &h, &f, &dout, &concat};
  return elementwise(g, SCG_GAT_GRAD_ROWS, a, rows * h);
}

/* The block's rows are the sources here and its columns the targets. */
int scg_gat_neighbour(scg *g, const scg_gat_block *b, scg_ptr src, scg_ptr own, scg_ptr dU,
                      scg_ptr dEr) {
  scg_gat_block k = *b;
  unsigned thr;
  float scale;
  drop(b, &thr, &scale);
  void *u[] = {&k.rowptr, &k.col, &src, &k.h, &k.f, &own, &dU, &k.rows, &k.key, &thr, &scale,
               &k.rowids, &k.row0, &k.colids, &k.col0};
  int r = elementwise(g, SCG_GAT_NEIGHBOUR_U, u, k.rows * k.h * k.f);
  if (r) return r;
  void *e[] = {&k.rowptr, &k.col, &src, &k.h, &k.f, &own, &dEr, &k.rows, &k.key, &thr, &scale,
               &k.rowids, &k.row0, &k.colids, &k.col0};
  return elementwise(g, SCG_GAT_NEIGHBOUR_ER, e, k.rows * k.h);
}

int scg_gat_score_grads(scg *g, scg_ptr dU, scg_ptr dEl, scg_ptr dEr, scg_ptr u, scg_ptr own,
                        scg_ptr al, scg_ptr ar, long long rows, int h, int f, long long chunk,
                        int chunks, scg_ptr partial, scg_ptr dAl, scg_ptr dAr) {
  void *su[] = {&dU, &dEl, &dEr, &al, &ar, &rows, &h, &f};
  int r = elementwise(g, SCG_GAT_SCORE_U, su, rows * h * f);
  if (r) return r;
  void *sv[] = {&dEl, &dEr, &u, &own, &rows, &h, &f, &chunk, &partial};
  if ((r = launch(g, SCG_GAT_SCORE_VEC, (unsigned)chunks, 1, 1, 128, 1, sv))) return r;
  long long hf = (long long)h * f, n = chunks;
  int acc = 0;
  scg_ptr right = partial + (scg_ptr)(n * hf * 4);
  void *l[] = {&partial, &n, &hf, &dAl, &acc};
  if ((r = launch(g, SCG_REDUCE, blocks(hf, 256), 1, 1, 256, 1, l))) return r;
  void *rr[] = {&right, &n, &hf, &dAr, &acc};
  return launch(g, SCG_REDUCE, blocks(hf, 256), 1, 1, 256, 1, rr);
}

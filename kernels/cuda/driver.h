//go:build cuda

// A thin C layer over the CUDA driver API for backend.go: one context,
// stream and module per backend, and one launch wrapper per kernel of
// sancus.cu, so that Go never builds a kernel-parameter array itself.
// Every function returns a CUresult (0 is success).
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

typedef unsigned long long scg_ptr;

enum {
  SCG_SPMM, SCG_GEMM, SCG_REDUCE, SCG_COLSUM, SCG_BIAS_RELU, SCG_RELU_BWD, SCG_SCALE,
  SCG_SUMSQ, SCG_TRIAD, SCG_PERMUTE, SCG_DROP_DENSE, SCG_DROP_CSR, SCG_SOFTMAX_CE, SCG_SPMM_WIDE,
  /* optional: a module may lack them (scg_has) */
  SCG_SPMM4, SCG_ELU, SCG_ELU_BWD, SCG_ADD, SCG_SCALE_ROWS, SCG_GEMM64,
  SCG_GAT_PAYLOAD, SCG_GAT_START, SCG_GAT_MAX, SCG_GAT_ATTEND, SCG_GAT_NORM, SCG_GAT_MEAN,
  SCG_GAT_GRAD_ROWS, SCG_GAT_NEIGHBOUR_U, SCG_GAT_NEIGHBOUR_ER, SCG_GAT_SCORE_U, SCG_GAT_SCORE_VEC,
  SCG_NKERNELS
};
#define SCG_NREQUIRED SCG_SPMM4

typedef struct {
  CUdevice dev;
  CUcontext ctx;
  CUstream stream;
  CUmodule mod;
  CUfunction fn[SCG_NKERNELS];
  /* set by the backend once it has recorded an error: no later kernel or
     device copy runs (a launch on a missing operand would fault the
     context every backend of the process shares) */
  int failed;
} scg;

int scg_device_count(int *n);
int scg_open(scg *g, int ordinal, const char *ptx, char *name, int namelen, size_t *totalmem);
int scg_close(scg *g);
const char *scg_error(int code);
int scg_has(scg *g, int k);

int scg_alloc(scg *g, scg_ptr *p, size_t bytes);
int scg_free(scg *g, scg_ptr p);
int scg_upload(scg *g, scg_ptr dst, const void *src, size_t bytes);
int scg_download(scg *g, void *dst, scg_ptr src, size_t bytes);
int scg_copy(scg *g, scg_ptr dst, scg_ptr src, size_t bytes);
int scg_zero(scg *g, scg_ptr p, size_t words);
int scg_sync(scg *g);

int scg_spmm(scg *g, scg_ptr rowptr, scg_ptr col, scg_ptr val, scg_ptr b, scg_ptr c,
             long long rows, int n, int acc);
int scg_gemm(scg *g, scg_ptr a, scg_ptr b, scg_ptr c, int m, int n, long long kdim,
             long long sai, long long sap, long long sbp, long long sbj, long long kchunk,
             int slabs, int acc);
int scg_reduce(scg *g, scg_ptr slab, long long slabs, long long len, scg_ptr out, int acc);
int scg_colsum(scg *g, scg_ptr x, long long rows, int n, long long chunk, int chunks, scg_ptr partial);
int scg_bias_relu(scg *g, scg_ptr z, scg_ptr bias, long long total, int n, int relu);
int scg_relu_backward(scg *g, scg_ptr grad, scg_ptr h, long long total);
int scg_scale(scg *g, scg_ptr x, float s, long long total);
int scg_sumsq(scg *g, scg_ptr x, long long total, int blocks, scg_ptr partial);
int scg_triad(scg *g, scg_ptr a, scg_ptr b, scg_ptr c, float s, long long total);
int scg_permute(scg *g, scg_ptr src, scg_ptr dst, scg_ptr perm, long long total);
int scg_dropout_dense(scg *g, scg_ptr src, scg_ptr dst, long long rows, int cols,
                      unsigned long long seed, unsigned long long stream, long long row0,
                      scg_ptr ids, unsigned thr, float scale);
int scg_dropout_csr(scg *g, scg_ptr rowptr, scg_ptr col, scg_ptr val, scg_ptr out, long long rows,
                    unsigned long long seed, unsigned long long stream, long long row0,
                    scg_ptr ids, unsigned thr, float scale);
int scg_softmax_ce(scg *g, scg_ptr z, int c, scg_ptr labels, scg_ptr rows, long long nrows,
                   double norm, scg_ptr grad, scg_ptr loss);
int scg_spmm_wide(scg *g, scg_ptr rowptr, scg_ptr col, scg_ptr val, scg_ptr b, scg_ptr c,
                  long long rows, int n, int acc);
int scg_spmm4(scg *g, scg_ptr rowptr, scg_ptr col, scg_ptr val, scg_ptr b, scg_ptr c,
              long long rows, int n, int acc);
int scg_elu(scg *g, scg_ptr z, long long total);
int scg_elu_backward(scg *g, scg_ptr grad, scg_ptr h, long long total);
int scg_add(scg *g, scg_ptr a, scg_ptr b, long long total);
int scg_scale_rows(scg *g, scg_ptr dst, scg_ptr src, scg_ptr s, long long rows, int n);

/* GAT's attention (sancus.cu): one wrapper per step of kernels.Attention.
   An edge's dropout is kept by a 16-bit draw against thr (key 0: none). */
typedef struct {
  scg_ptr rowptr, col, rowids, colids; /* the block; ids 0: row0 + r, col0 + c */
  long long rows, row0, col0;
  int h, f;
  unsigned long long key;
  float keep;
} scg_gat_block;
int scg_gat_payload(scg *g, scg_ptr u, scg_ptr al, scg_ptr ar, scg_ptr pay, scg_ptr el,
                    long long rows, int h, int f);
int scg_gat_start(scg *g, scg_ptr m, scg_ptr s, scg_ptr c, scg_ptr o, scg_ptr o2, long long rows,
                  int h, int hf);
int scg_gat_attend(scg *g, const scg_gat_block *b, scg_ptr src, scg_ptr el, scg_ptr m, scg_ptr s,
                   scg_ptr o, scg_ptr o2, scg_ptr c);
int scg_gat_finish(scg *g, scg_ptr o, scg_ptr s, scg_ptr z, long long rows, int h, int f, int concat);
int scg_gat_grad_rows(scg *g, scg_ptr gpay, scg_ptr dEl, scg_ptr grad, scg_ptr el, scg_ptr m,
                      scg_ptr s, scg_ptr o, scg_ptr o2, scg_ptr c, long long rows, int h, int f,
                      int dout, int concat);
int scg_gat_neighbour(scg *g, const scg_gat_block *b, scg_ptr src, scg_ptr own, scg_ptr dU,
                      scg_ptr dEr);
int scg_gat_score_grads(scg *g, scg_ptr dU, scg_ptr dEl, scg_ptr dEr, scg_ptr u, scg_ptr own,
                        scg_ptr al, scg_ptr ar, long long rows, int h, int f, long long chunk,
                        int chunks, scg_ptr partial, scg_ptr dAl, scg_ptr dAr);

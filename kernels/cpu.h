// CPU kernels for sancus. Each function works on a row range [r0, r1) so the
// Go side can split work across goroutines; none allocates.
#include <stdint.h>

// sc_mask is one dropout application (matrix.Mask): element (r, c) is kept,
// scaled, when its draw (dropout_rng.h) for node id ids[r] (row0 + r
// without ids) is at least thr. With bits (a row's kept columns, bit c of
// row r at byte r·bits_stride + c/8), the products' dropout of an A whose
// width is a multiple of 32 records the draws there (replay 0) or reads
// them back instead of drawing (replay 1): a backward takes its forward's
// mask without the hash.
typedef struct {
  uint64_t seed, stream;
  int64_t row0;
  const int64_t *ids;
  uint32_t thr;
  float scale;
  uint8_t *bits;
  int64_t bits_stride;
  int replay;
} sc_mask;

// rows (nil: r0..r1 themselves) lists the rows at positions [r0, r1); kb
// is B's row count (0: not known), which picks the path for a B in L1.
void sc_spmm(const int64_t *rowptr, const int32_t *col, const float *val,
             const float *B, int64_t kb, float *C, int64_t n, int64_t r0, int64_t r1, int acc,
             const int32_t *rows);
// sc_spmm at rows' positions [r0, r1), row rows[i]'s nonzeros being
// [ptr[i], ptr[i+1]): the rows' own pointers, not every row's.
void sc_spmm_compact(const int64_t *ptr, const int32_t *col, const float *val, const float *B,
                     int64_t kb, float *C, int64_t n, int64_t r0, int64_t r1, int acc,
                     const int32_t *rows);
// sc_spmm (sc_spmm_compact with compact) over B's rows [lo, hi) alone, B
// holding those: row i's nonzeros from cur[i] (its first, with first) up
// to the first of column hi or more, where cur[i] is left.
void sc_spmm_cols(const int64_t *ptr, const int32_t *col, const float *val, const float *B,
                  int64_t lo, int64_t hi, float *C, int64_t n, int64_t r0, int64_t r1, int acc,
                  const int32_t *rows, int compact, int64_t *cur, int first);
// C (m×n, A's columns × B's) = Aᵀ·B over A's rows [r0, r1), without Aᵀ.
void sc_spmm_t(const int64_t *rowptr, const int32_t *col, const float *val, const float *B,
               float *C, int64_t m, int64_t n, int64_t r0, int64_t r1);
// m (nil: none) is dropout applied to A's rows as they are read.
void sc_gemm_nn(const float *A, const float *B, float *C, int64_t k, int64_t n,
                int64_t r0, int64_t r1, int acc, const sc_mask *m);
void sc_gemm_tn(const float *A, const float *B, float *C, int64_t k, int64_t n,
                int64_t r0, int64_t r1, const sc_mask *m);
// The same at the rows listed only (rows[0..cnt)); tn's C is the sum over them.
// With bias, bias + ReLU as rows are written; with then too, each row
// dropped by then into the same row of dropped.
void sc_gemm_nn_rows(const float *A, const float *B, float *C, int64_t k, int64_t n,
                     const int32_t *rows, int64_t cnt, const sc_mask *m, const float *bias,
                     const sc_mask *then, float *dropped);
void sc_gemm_tn_rows(const float *A, const float *B, float *C, int64_t k, int64_t n,
                     const int32_t *rows, int64_t cnt, const sc_mask *m);
// dst's k-th row = src's row rows[k] (gather) or the reverse (scatter), rows w bytes.
void sc_gather_rows(char *dst, const char *src, const int32_t *rows, int64_t cnt, int64_t w);
void sc_gather_rows_stream(char *dst, const char *src, const int32_t *rows, int64_t cnt, int64_t w);
void sc_scatter_rows(char *dst, const char *src, const int32_t *rows, int64_t cnt, int64_t w);
// dst's row rows[k] += src's k-th row, rows w floats and distinct.
void sc_add_rows(float *dst, const float *src, const int32_t *rows, int64_t cnt, int64_t w);
int64_t sc_first_bad_row(const int32_t *rows, int64_t cnt, int64_t n);
void sc_triad(float *a, const float *b, const float *c, float s, int64_t i0, int64_t i1);
void sc_add(float *a, const float *b, int64_t i0, int64_t i1); // a += b (a and b apart)
// dst's rows [r0, r1) (n wide) = src's times s[r]; dst may be src.
void sc_scale_rows(float *dst, const float *src, const float *s, int64_t n, int64_t r0, int64_t r1);
double sc_sum(const float *a, int64_t i0, int64_t i1, int64_t reps);
void sc_gather_sum(const int64_t *rowptr, const int32_t *col, const float *B, float *C, int64_t n,
                   int64_t r0, int64_t r1);
int sc_simd_level(void);
void sc_limit_simd(int level); // tests: run a lower level on this CPU
void sc_dropout_dense(const float *src, float *dst, int64_t cols, int64_t r0, int64_t r1,
                      const sc_mask *m);
void sc_dropout_rows(const float *src, float *dst, int64_t cols, const int32_t *rows, int64_t cnt,
                     const sc_mask *m);
void sc_dropout_gather(const float *src, float *dst, int64_t cols, const int32_t *rows, int64_t cnt,
                       const sc_mask *m);
void sc_dropout_relu_backward(float *g, const float *h, int64_t cols, int64_t r0, int64_t r1,
                              const sc_mask *m, float *sums);
void sc_relu_dropped_backward(float *g, const float *d, int64_t cols, int64_t r0, int64_t r1,
                              float scale, float *sums);
void sc_dropout_csr(const int64_t *rowptr, const int32_t *col, const float *val, float *out,
                    int64_t r0, int64_t r1, const sc_mask *m);
void sc_exp(const float *x, float *y, int64_t n);
double sc_softmax_ce(const float *z, int64_t c, const int32_t *labels, const int32_t *rows,
                     int64_t i0, int64_t i1, double norm, float *grad);
// rows (nil: r0..r1 themselves) lists the rows at positions [r0, r1).
void sc_column_sums(const float *g, int64_t n, int64_t r0, int64_t r1, const int32_t *rows,
                    float *out);
void sc_bias_relu(float *z, const float *bias, int64_t n, int64_t r0, int64_t r1, int relu,
                  const int32_t *rows);
void sc_relu_backward(float *g, const float *h, int64_t i0, int64_t i1);
void sc_elu(float *h, int64_t i0, int64_t i1);
void sc_elu_backward(float *g, const float *h, int64_t i0, int64_t i1);
// sc_quant_rows encodes the rows at positions [r0, r1) of rows (NULL: rows
// r0..r1 themselves); every array is indexed by row.
void sc_quant_rows(const float *x, const float *ref, int64_t r0, int64_t r1, const int32_t *rows,
                   int64_t width, int bits, uint64_t key, const uint64_t *rowhash, uint8_t *dst,
                   float *dec, int add, int err_every, double *sums);
void sc_dequant_rows(const uint8_t *src, int64_t r0, int64_t r1, int64_t width, int bits, int add,
                     float *dst);
#include "gat.h"

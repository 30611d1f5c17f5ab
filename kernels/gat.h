// GAT's attention over one column block on the CPU (gat.c). Apart from
// cpu.h so that the CUDA kernels' CPU emulation (cuda/testdata/emulate.cpp)
// can declare these beside kernels whose names cpu.h's other functions share.
#ifndef SC_GAT_H
#define SC_GAT_H
#include <stdint.h>

void sc_gat_attend(const int64_t *rowptr, const int32_t *col, const float *src, int64_t h, int64_t f,
                   const float *el, float *m, float *s, float *o, float *o2, float *c, int64_t r0,
                   int64_t r1, uint64_t key, float keep, const int64_t *tids, int64_t trow0,
                   const int64_t *sids, int64_t srow0);
void sc_gat_neighbour(const int64_t *rowptr, const int32_t *col, const float *src, int64_t h, int64_t f,
                      const float *own, float *dU, float *dEr, int64_t r0, int64_t r1, uint64_t key,
                      float keep, const int64_t *oids, int64_t orow0, const int64_t *tids, int64_t trow0);
void sc_gat_score_grads(float *dU, const float *dEl, const float *dEr, const float *u, const float *own,
                        int64_t ow, const float *al, const float *ar, int64_t h, int64_t f, int64_t r0,
                        int64_t r1, float *part);
void sc_gat_pay_rows(float *pay, float *el, const float *u, const float *al, const float *ar, int64_t h,
                    int64_t f, int64_t r0, int64_t r1);
int sc_gat_starts_rows(int64_t h, int64_t f);
void sc_gat_clear_unstarted(const float *m, float *o, float *o2, float *c, int64_t h, int64_t f, int64_t r0,
                            int64_t r1);
void sc_gat_outputs(float *z, int64_t zc, float *o, const float *s, int64_t h, int64_t f, int concat,
                   int64_t r0, int64_t r1);
void sc_gat_gradient_rows(float *gpay, float *dEl, const float *g, int64_t gc, const float *el, const float *m,
                      const float *s, const float *o, const float *o2, const float *c, int64_t h, int64_t f,
                      int concat, int64_t r0, int64_t r1);

#endif

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

#endif

// drop_csr for one instruction set, included by dropout.c once per level
// (SC_SUFFIX, SC_TARGET: simd.h).
//
// drop_csr writes rows [r0, r1)'s values dropped and scaled, L nonzeros at a
// time: each lane hashes its own column's pair (sc_drop_draw on vectors),
// so a row's columns need not be contiguous. A row's last vector runs past
// its end (feature rows hold about L nonzeros) with this row's key; the
// rows after it, drawn next, write those lanes again. Only the range's last
// nonzeros, whose lanes past the end belong to other threads, go plainly.
SC_TARGET static void SC_FN(drop_csr)(const int64_t *rowptr, const int32_t *col, const float *val,
                                      float *out, int64_t r0, int64_t r1, const sc_mask *m) {
  typedef SC_VF vf;
  typedef uint32_t vu __attribute__((vector_size(sizeof(vf)), aligned(4)));
  typedef int32_t vi __attribute__((vector_size(sizeof(vf)), aligned(4)));
  enum { L = sizeof(vf) / sizeof(float) };
  const int32_t thr = (int32_t)m->thr;
  const float scale = m->scale;
  const int64_t lim = rowptr[r1];
  for (int64_t r = r0; r < r1; r++) {
    const uint32_t key = sc_drop_key(m->seed, m->stream, (uint64_t)(m->ids ? m->ids[r] : m->row0 + r));
    int64_t p = rowptr[r];
    const int64_t e = rowptr[r + 1];
    for (; p < e && p + L <= lim; p += L) {
      const vu c = *(const vu *)(col + p);
      vu h = ((c >> 5) * 16 + (c & 15)) * 0x9e3779b9u ^ key;
      SC_HASH32_MIX(h);
      const vi keep = (vi)((h >> (c & 16)) & 0xffff) >= thr;
      const vf y = *(const vf *)(val + p) * scale;
      *(vf *)(out + p) = (vf)((vi)y & keep);
    }
    for (; p < e; p++)
      out[p] = (int32_t)sc_drop_draw(key, (uint64_t)col[p]) >= thr ? val[p] * scale : 0.0f;
  }
}

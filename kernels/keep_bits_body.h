// put_bits and get_bits for one level, included by gemm.c once per level
// with SC_MOVEMASK(keep) (the level's lanes of keep as the low bits of an
// integer) besides SC_SUFFIX and SC_TARGET (simd.h).
//
// A vector's kept lanes as bits (lane j: bit j) and back, for a mask's
// record (sc_mask.bits). Below L = 8 lanes two vectors share a byte.
SC_TARGET static inline void SC_FN(put_bits)(uint8_t *b, int64_t c, SC_FN(vi) keep) {
  enum { L = sizeof(keep) / sizeof(int32_t) };
  const uint32_t x = (uint32_t)SC_MOVEMASK(keep);
  if (L == 16)
    memcpy(b + c / 8, &(uint16_t){(uint16_t)x}, 2);
  else if (L == 8)
    b[c / 8] = (uint8_t)x;
  else
    b[c / 8] = (c & 7) ? (uint8_t)(b[c / 8] | x << 4) : (uint8_t)x;
}

SC_TARGET static inline SC_FN(vi) SC_FN(get_bits)(const uint8_t *b, int64_t c) {
  typedef uint32_t vu __attribute__((vector_size(sizeof(SC_FN(vi)))));
  enum { L = sizeof(SC_FN(vi)) / sizeof(int32_t) };
  uint32_t x;
  if (L == 16) {
    uint16_t w;
    memcpy(&w, b + c / 8, 2);
    x = w;
  } else
    x = (uint32_t)b[c / 8] >> (c & 7);
  vu lane;
  for (int j = 0; j < L; j++) lane[j] = 1u << j;
  return (SC_FN(vi))((((vu){0} + x) & lane) != 0);
}

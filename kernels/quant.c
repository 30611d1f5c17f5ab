// Row quantization for the wire (collectives/wire holds the format and the
// Go reference these must match bit for bit). No fused multiply-adds: the
// Go side rounds every operation.
#pragma GCC optimize("fp-contract=off")
#include <math.h>
#include <string.h>
#include "cpu.h"

static inline float from_bf16(uint16_t t) {
  uint32_t b = (uint32_t)t << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

static inline uint16_t bf16_trunc(float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  return (uint16_t)(b >> 16);
}

static inline uint16_t next_bf16(uint16_t t, int up) {
  int neg = (t & 0x8000) != 0;
  if ((t & 0x7fff) == 0) return up ? 1 : 0x8001;
  return (up != neg) ? (uint16_t)(t + 1) : (uint16_t)(t - 1);
}

static inline uint16_t bf16_down(float v) {
  uint16_t t = bf16_trunc(v);
  return from_bf16(t) > v ? next_bf16(t, 0) : t;
}

static inline uint16_t bf16_up(float v) {
  uint16_t t = bf16_trunc(v);
  return from_bf16(t) < v ? next_bf16(t, 1) : t;
}

void sc_quant_rows(const float *x, int64_t r0, int64_t r1, int64_t width, int bits,
                   const uint64_t *seeds, uint8_t *dst) {
  const int64_t rb = 4 + (width * bits + 7) / 8;
  const float levels = (float)((1 << bits) - 1);
  for (int64_t r = r0; r < r1; r++) {
    const float *xr = x + r * width;
    uint8_t *d = dst + r * rb;
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < width; i++) {
      lo = xr[i] < lo ? xr[i] : lo;
      hi = xr[i] > hi ? xr[i] : hi;
    }
    if (width == 0) lo = hi = 0;
    uint16_t offb = bf16_down(lo);
    float off = from_bf16(offb);
    uint16_t stepb = bf16_up((hi - off) / levels);
    float step = from_bf16(stepb);
    d[0] = (uint8_t)offb, d[1] = (uint8_t)(offb >> 8), d[2] = (uint8_t)stepb, d[3] = (uint8_t)(stepb >> 8);
    uint8_t *body = d + 4;
    memset(body, 0, (size_t)(rb - 4));
    if (step == 0) continue;
    const float inv = 1.0f / step;
    uint64_t s = seeds[r] | 1, w = 0;
    for (int64_t i = 0; i < width; i++) {
      if ((i & 1) == 0) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        w = s * 0x2545f4914f6cdd1dULL;
      }
      float u = (float)((uint32_t)(w >> (32 * (i & 1))) >> 8) * (1.0f / 16777216.0f);
      float f = (xr[i] - off) * inv + u;
      int32_t q = (int32_t)f;
      q = q < 0 ? 0 : q;
      q = q > (int32_t)levels ? (int32_t)levels : q;
      int64_t bit = i * bits;
      body[bit / 8] |= (uint8_t)(q << (bit % 8));
    }
  }
}

// dequant_body is one row's values for a constant width of bits, so the
// shifts and masks are constants.
#define DEQUANT(BITS)                                              \
  for (int64_t i = 0; i < width; i++) {                            \
    uint8_t q = (body[i / (8 / BITS)] >> ((i % (8 / BITS)) * BITS)) \
                & ((1 << BITS) - 1);                               \
    float t = (float)q * step;                                     \
    float v = off + t;                                             \
    d[i] = add ? d[i] + v : v;                                     \
  }

void sc_dequant_rows(const uint8_t *src, int64_t r0, int64_t r1, int64_t width, int bits, int add,
                     float *dst) {
  const int64_t rb = 4 + (width * bits + 7) / 8;
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t *s = src + r * rb;
    float off = from_bf16((uint16_t)(s[0] | s[1] << 8)), step = from_bf16((uint16_t)(s[2] | s[3] << 8));
    const uint8_t *body = s + 4;
    float *d = dst + r * width;
    switch (bits) {
    case 2: DEQUANT(2) break;
    case 4: DEQUANT(4) break;
    default: DEQUANT(8) break;
    }
  }
}

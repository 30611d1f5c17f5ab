// Row quantization for the wire (collectives/wire holds the format and the
// Go reference these must match bit for bit). No fused multiply-adds: the
// Go side rounds every operation. Like cpu.c, each kernel is compiled for
// AVX2 and for the baseline ISA and picked at run time.
#pragma GCC optimize("fp-contract=off")
#include <math.h>
#include <string.h>
#include "cpu.h"
#include "dropout_rng.h"

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

// Values are handled in chunks of CH so the integer codes of a chunk fit a
// small stack buffer; CH is a multiple of 8 so chunks pack to whole bytes.
#define CH 256

// pack_codes writes n codes of bits each, LSB first, into body.
static inline void pack_codes(const uint8_t *restrict q, int64_t n, int bits,
                              uint8_t *restrict body) {
  const int per = 8 / bits;
  const int64_t full = n / per;
  switch (bits) {
  case 2:
    for (int64_t k = 0; k < full; k++)
      body[k] = (uint8_t)(q[4 * k] | q[4 * k + 1] << 2 | q[4 * k + 2] << 4 | q[4 * k + 3] << 6);
    break;
  case 4:
    for (int64_t k = 0; k < full; k++) body[k] = (uint8_t)(q[2 * k] | q[2 * k + 1] << 4);
    break;
  default:
    memcpy(body, q, (size_t)n);
    return;
  }
  if (full * per < n) {
    uint8_t b = 0;
    for (int64_t i = full * per; i < n; i++) b |= (uint8_t)(q[i] << ((i - full * per) * bits));
    body[full] = b;
  }
}

static inline void unpack_codes(const uint8_t *restrict body, int64_t n, int bits,
                                uint8_t *restrict q) {
  switch (bits) {
  case 2:
    for (int64_t i = 0; i < n; i++) q[i] = (body[i >> 2] >> ((i & 3) * 2)) & 3;
    break;
  case 4:
    for (int64_t i = 0; i < n; i++) q[i] = (body[i >> 1] >> ((i & 1) * 4)) & 15;
    break;
  default:
    memcpy(q, body, (size_t)n);
  }
}

// The uniform u in [0, 1) that rounds value i of a row keyed k: a 32-bit
// avalanche hash of (k, i), so every value's draw is independent of the
// others and the loop vectorizes (wire.go's uniform is the same function).
static inline float uniform(uint32_t k, uint32_t i) {
  return (float)(int32_t)(sc_hash32(k, i) >> 8) * (1.0f / 16777216.0f);
}

// row_header computes a row's offset and step from its range and writes
// them (bf16, offset rounded down and step up so the codes cover the row).
// Zeros are made positive so the header does not depend on which signed
// zero a reduction met first.
static inline void row_header(float lo, float hi, int bits, uint8_t *o, float *off, float *step) {
  lo += 0.0f, hi += 0.0f;
  const uint16_t offb = bf16_down(lo);
  *off = from_bf16(offb);
  const uint16_t stepb = bf16_up((hi - *off) / (float)((1 << bits) - 1));
  *step = from_bf16(stepb);
  o[0] = (uint8_t)offb, o[1] = (uint8_t)(offb >> 8);
  o[2] = (uint8_t)stepb, o[3] = (uint8_t)(stepb >> 8);
}

// row_at is the row at position p of a call: rows[p], or p itself where
// the call encodes every row (rows NULL).
static inline int64_t row_at(const int32_t *rows, int64_t p) { return rows ? rows[p] : p; }

static inline uint32_t row_key(uint64_t key, uint64_t rowhash) {
  const uint64_t seed = sc_mix64(key ^ rowhash) | 1;
  return (uint32_t)seed ^ (uint32_t)(seed >> 32);
}

// The error sums keep 8 lanes (lane = value index mod 8) across the rows of
// a call, combined in lane order at the end, so the vector kernel and the
// portable one give the same sums.
static void quant_base(const float *restrict x, const float *restrict ref, int64_t r0, int64_t r1,
                       const int32_t *rows, int64_t width, int bits, uint64_t key,
                       const uint64_t *restrict rowhash, uint8_t *restrict dst,
                       float *restrict dec, int add, int err_every, double *sums) {
  const int64_t rb = 4 + (width * bits + 7) / 8;
  const int32_t top = (1 << bits) - 1;
  float e8[8] = {0}, f8[8] = {0};
  uint8_t q[CH];
  for (int64_t p = r0; p < r1; p++) {
    const int64_t r = row_at(rows, p);
    const float *restrict xr = x + r * width, *restrict fr = ref + r * width;
    float *restrict d = dec ? dec + r * width : NULL;
    uint8_t *restrict o = dst + r * rb;
    float lo = INFINITY, hi = -INFINITY, off, step;
    for (int64_t i = 0; i < width; i++) {
      lo = xr[i] < lo ? xr[i] : lo;
      hi = xr[i] > hi ? xr[i] : hi;
    }
    if (width == 0) lo = hi = 0;
    row_header(lo, hi, bits, o, &off, &step);
    const uint32_t k = row_key(key, rowhash[r]);
    const float inv = step == 0 ? 0.0f : 1.0f / step;
    const int with_err = p % err_every == 0;
    for (int64_t c0 = 0; c0 < width; c0 += CH) {
      const int64_t n = width - c0 < CH ? width - c0 : CH;
      for (int64_t j = 0; j < n; j++) {
        const int64_t i = c0 + j;
        int32_t v = (int32_t)((xr[i] - off) * inv + uniform(k, (uint32_t)i));
        v = v < 0 ? 0 : v;
        v = v > top ? top : v;
        q[j] = (uint8_t)v;
        const float y = off + (float)v * step, dd = y - xr[i];
        if (with_err) {
          e8[i & 7] += dd * dd;
          f8[i & 7] += fr[i] * fr[i];
        }
        if (d) d[i] = add ? d[i] + y : y;
      }
      pack_codes(q, n, bits, o + 4 + c0 * bits / 8);
    }
  }
  float e = 0, f2 = 0;
  for (int l = 0; l < 8; l++) e += e8[l], f2 += f8[l];
  sums[0] += e, sums[1] += f2;
}

static void dequant_base(const uint8_t *restrict src, int64_t r0, int64_t r1, int64_t width,
                         int bits, int add, float *restrict dst) {
  const int64_t rb = 4 + (width * bits + 7) / 8;
  uint8_t q[CH];
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t *s = src + r * rb;
    const float off = from_bf16((uint16_t)(s[0] | s[1] << 8));
    const float step = from_bf16((uint16_t)(s[2] | s[3] << 8));
    float *restrict d = dst + r * width;
    for (int64_t c0 = 0; c0 < width; c0 += CH) {
      const int64_t n = width - c0 < CH ? width - c0 : CH;
      unpack_codes(s + 4 + c0 * bits / 8, n, bits, q);
      if (add)
        for (int64_t j = 0; j < n; j++) d[c0 + j] += off + (float)q[j] * step;
      else
        for (int64_t j = 0; j < n; j++) d[c0 + j] = off + (float)q[j] * step;
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2")))

// or8 ORs the eight 32-bit lanes of v into one.
AVX2 static inline uint32_t or8(__m256i v) {
  __m128i a = _mm_or_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  a = _mm_or_si128(a, _mm_shuffle_epi32(a, 0x4e));
  a = _mm_or_si128(a, _mm_shuffle_epi32(a, 0xb1));
  return (uint32_t)_mm_cvtsi128_si32(a);
}

// or4x2 ORs lanes 0–3 and lanes 4–7 of v: two 32-bit words.
AVX2 static inline uint64_t or4x2(__m256i v) {
  __m128i a = _mm256_castsi256_si128(v), b = _mm256_extracti128_si256(v, 1);
  a = _mm_or_si128(a, _mm_shuffle_epi32(a, 0x4e));
  a = _mm_or_si128(a, _mm_shuffle_epi32(a, 0xb1));
  b = _mm_or_si128(b, _mm_shuffle_epi32(b, 0x4e));
  b = _mm_or_si128(b, _mm_shuffle_epi32(b, 0xb1));
  return (uint64_t)(uint32_t)_mm_cvtsi128_si32(a) | (uint64_t)(uint32_t)_mm_cvtsi128_si32(b) << 32;
}

// hmin and hmax reduce the lanes of v (exact in any order; signed zeros
// are made equal by row_header).
AVX2 static inline float hmin(__m256 v) {
  __m128 a = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_min_ps(a, _mm_shuffle_ps(a, a, 0x4e));
  return _mm_cvtss_f32(_mm_min_ps(a, _mm_shuffle_ps(a, a, 0xb1)));
}

AVX2 static inline float hmax(__m256 v) {
  __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_max_ps(a, _mm_shuffle_ps(a, a, 0x4e));
  return _mm_cvtss_f32(_mm_max_ps(a, _mm_shuffle_ps(a, a, 0xb1)));
}

AVX2 static float hsum_in_order(__m256 v) {
  float l[8], s = 0;
  _mm256_storeu_ps(l, v);
  for (int i = 0; i < 8; i++) s += l[i];
  return s;
}

// bf16_step8 is next_bf16 on 8 lanes of bf16 bits t (one per 32-bit
// lane): up a step (up: toward +inf) or down, ±0 to the smallest value of
// that sign; where moves is clear, t as it is.
AVX2 static inline __m256i bf16_step8(__m256i t, __m256i moves, int up) {
  const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi32(1);
  const __m256i neg = _mm256_cmpeq_epi32(_mm256_and_si256(t, _mm256_set1_epi32(0x8000)),
                                         _mm256_set1_epi32(0x8000));
  const __m256i is0 = _mm256_cmpeq_epi32(_mm256_and_si256(t, _mm256_set1_epi32(0x7fff)), zero);
  const __m256i plus = _mm256_add_epi32(t, one), minus = _mm256_sub_epi32(t, one);
  // (up != neg) ? t + 1 : t − 1
  __m256i n = up ? _mm256_blendv_epi8(plus, minus, neg) : _mm256_blendv_epi8(minus, plus, neg);
  n = _mm256_blendv_epi8(n, _mm256_set1_epi32(up ? 1 : 0x8001), is0);
  return _mm256_and_si256(_mm256_blendv_epi8(t, n, moves), _mm256_set1_epi32(0xffff));
}

// headers8_avx2 is row_header and the reciprocal step for 8 rows at once,
// the same operations lane by lane (a row of 16 values spent most of its
// time on its header, one row at a time); it writes the 8 headers to dst
// one after another.
AVX2 static inline void headers8_avx2(const float *los, const float *his, int bits, uint8_t *dst,
                                      float *offs, float *steps, float *invs) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 lo = _mm256_add_ps(_mm256_loadu_ps(los), zero);
  const __m256 hi = _mm256_add_ps(_mm256_loadu_ps(his), zero);
  // bf16_down(lo): truncated, a step down where that rounded up
  __m256i t = _mm256_srli_epi32(_mm256_castps_si256(lo), 16);
  __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(t, 16));
  const __m256i offb = bf16_step8(t, _mm256_castps_si256(_mm256_cmp_ps(f, lo, _CMP_GT_OQ)), 0);
  const __m256 off = _mm256_castsi256_ps(_mm256_slli_epi32(offb, 16));
  const __m256 s = _mm256_div_ps(_mm256_sub_ps(hi, off), _mm256_set1_ps((float)((1 << bits) - 1)));
  // bf16_up(s): truncated, a step up where that rounded down
  t = _mm256_srli_epi32(_mm256_castps_si256(s), 16);
  f = _mm256_castsi256_ps(_mm256_slli_epi32(t, 16));
  const __m256i stepb = bf16_step8(t, _mm256_castps_si256(_mm256_cmp_ps(f, s, _CMP_LT_OQ)), 1);
  const __m256 step = _mm256_castsi256_ps(_mm256_slli_epi32(stepb, 16));
  const __m256 inv = _mm256_andnot_ps(_mm256_cmp_ps(step, zero, _CMP_EQ_OQ),
                                      _mm256_div_ps(_mm256_set1_ps(1.0f), step));
  _mm256_storeu_ps(offs, off);
  _mm256_storeu_ps(steps, step);
  _mm256_storeu_ps(invs, inv);
  // 8 headers, one after another (little-endian: off, then step)
  _mm256_storeu_si256((__m256i *)dst, _mm256_or_si256(offb, _mm256_slli_epi32(stepb, 16)));
}

// quant_avx2 is quant_base for rows of a multiple of 8 values, 8 at a time:
// the same operations in the same order per value, so the same bytes.
// quant_row_avx2 rounds, decodes and packs one row, 8 values at a time,
// adding its squared errors and squared reference values to ev and fv when
// with_err is set.
AVX2 static inline void quant_row_avx2(const float *restrict xr, const float *restrict fr,
                                       float *restrict d, uint8_t *restrict body, int64_t width,
                                       int bits, __m256i k, __m256 off, __m256 step, __m256 inv,
                                       int add, int with_err, __m256 *ev, __m256 *fv) {
  // (lane + i)·golden = lane·golden + i·golden: one add per 8 values.
  const __m256i lanes = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32((int32_t)0x9e3779b9u));
  const __m256i shift = _mm256_setr_epi32(0, bits, 2 * bits, 3 * bits, (4 * bits) & 31,
                                          (5 * bits) & 31, (6 * bits) & 31, (7 * bits) & 31);
  const __m256i top = _mm256_set1_epi32((1 << bits) - 1), zero = _mm256_setzero_si256();
  const __m256 unit = _mm256_set1_ps(1.0f / 16777216.0f);
  for (int64_t i = 0; i < width; i += 8) {
    __m256i h = _mm256_add_epi32(lanes, _mm256_set1_epi32((int32_t)((uint32_t)i * 0x9e3779b9u)));
    h = _mm256_xor_si256(h, k);
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32(0x7feb352d));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32((int32_t)0x846ca68bu));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8)), unit);
    const __m256 xv = _mm256_loadu_ps(xr + i);
    const __m256 f = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(xv, off), inv), u);
    __m256i q = _mm256_cvttps_epi32(f);
    q = _mm256_min_epi32(_mm256_max_epi32(q, zero), top);
    const __m256 y = _mm256_add_ps(off, _mm256_mul_ps(_mm256_cvtepi32_ps(q), step));
    if (with_err) {
      const __m256 dd = _mm256_sub_ps(y, xv), rv = _mm256_loadu_ps(fr + i);
      *ev = _mm256_add_ps(*ev, _mm256_mul_ps(dd, dd));
      *fv = _mm256_add_ps(*fv, _mm256_mul_ps(rv, rv));
    }
    if (d) _mm256_storeu_ps(d + i, add ? _mm256_add_ps(_mm256_loadu_ps(d + i), y) : y);
    const __m256i sh = _mm256_sllv_epi32(q, shift);
    uint8_t *b = body + i * bits / 8;
    if (bits == 8) {
      const uint64_t w = or4x2(sh);
      memcpy(b, &w, 8);
    } else if (bits == 4) {
      const uint32_t w = or8(sh);
      memcpy(b, &w, 4);
    } else {
      const uint16_t w = (uint16_t)or8(sh);
      memcpy(b, &w, 2);
    }
  }
}

AVX2 static void quant_avx2(const float *restrict x, const float *restrict ref, int64_t r0,
                            int64_t r1, const int32_t *rows, int64_t width, int bits, uint64_t key,
                            const uint64_t *restrict rowhash, uint8_t *restrict dst,
                            float *restrict dec, int add, int err_every, double *sums) {
  const int64_t rb = 4 + (width * bits + 7) / 8;
  __m256 ev = _mm256_setzero_ps(), fv = _mm256_setzero_ps();
  // Rows go in groups: first every row's range, then every header, then
  // the values, so the short dependent chains of different rows overlap.
  enum { G = 16 };
  float offs[G], steps[G], invs[G];
  uint32_t keys[G];
  for (int64_t g0 = r0; g0 < r1; g0 += G) {
    const int64_t gn = r1 - g0 < G ? r1 - g0 : G;
    float los[G], his[G];
    for (int64_t j = 0; j < gn; j++) {
      const float *restrict xr = x + row_at(rows, g0 + j) * width;
      __m256 lov = _mm256_loadu_ps(xr), hiv = lov;
      for (int64_t i = 8; i < width; i += 8) {
        const __m256 xv = _mm256_loadu_ps(xr + i);
        lov = _mm256_min_ps(xv, lov);
        hiv = _mm256_max_ps(xv, hiv);
      }
      los[j] = hmin(lov), his[j] = hmax(hiv);
    }
    int64_t j = 0;
    uint8_t hdr[G * 4];
    for (; j + 8 <= gn; j += 8)
      headers8_avx2(los + j, his + j, bits, hdr + 4 * j, offs + j, steps + j, invs + j);
    for (; j < gn; j++) {
      row_header(los[j], his[j], bits, hdr + 4 * j, &offs[j], &steps[j]);
      invs[j] = steps[j] == 0 ? 0.0f : 1.0f / steps[j];
    }
    for (j = 0; j < gn; j++) {
      const int64_t r = row_at(rows, g0 + j);
      memcpy(dst + r * rb, hdr + 4 * j, 4);
      keys[j] = row_key(key, rowhash[r]);
    }
    for (int64_t j = 0; j < gn; j++) {
      const int64_t p = g0 + j, r = row_at(rows, p);
      const __m256i k = _mm256_set1_epi32((int32_t)keys[j]);
      const __m256 off = _mm256_set1_ps(offs[j]), step = _mm256_set1_ps(steps[j]);
      const __m256 inv = _mm256_set1_ps(invs[j]);
      if (p % err_every == 0)
        quant_row_avx2(x + r * width, ref + r * width, dec ? dec + r * width : NULL, dst + r * rb + 4, width,
                       bits, k, off, step, inv, add, 1, &ev, &fv);
      else
        quant_row_avx2(x + r * width, ref + r * width, dec ? dec + r * width : NULL, dst + r * rb + 4, width,
                       bits, k, off, step, inv, add, 0, &ev, &fv);
    }
  }
  sums[0] += hsum_in_order(ev), sums[1] += hsum_in_order(fv);
}

AVX2 static void dequant_avx2(const uint8_t *restrict src, int64_t r0, int64_t r1, int64_t width,
                              int bits, int add, float *restrict dst) {
  const int64_t rb = 4 + (width * bits + 7) / 8;
  const __m256i shift = _mm256_setr_epi32(0, bits, 2 * bits, 3 * bits, (4 * bits) & 31,
                                          (5 * bits) & 31, (6 * bits) & 31, (7 * bits) & 31);
  const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t *s = src + r * rb, *body = s + 4;
    const __m256 off = _mm256_set1_ps(from_bf16((uint16_t)(s[0] | s[1] << 8)));
    const __m256 step = _mm256_set1_ps(from_bf16((uint16_t)(s[2] | s[3] << 8)));
    float *restrict d = dst + r * width;
    for (int64_t i = 0; i < width; i += 8) {
      const uint8_t *b = body + i * bits / 8;
      __m256i w;
      if (bits == 8) {
        uint64_t v;
        memcpy(&v, b, 8);
        w = _mm256_setr_epi32((int32_t)v, (int32_t)v, (int32_t)v, (int32_t)v, (int32_t)(v >> 32),
                              (int32_t)(v >> 32), (int32_t)(v >> 32), (int32_t)(v >> 32));
      } else if (bits == 4) {
        uint32_t v;
        memcpy(&v, b, 4);
        w = _mm256_set1_epi32((int32_t)v);
      } else {
        uint16_t v;
        memcpy(&v, b, 2);
        w = _mm256_set1_epi32((int32_t)v);
      }
      const __m256i q = _mm256_and_si256(_mm256_srlv_epi32(w, shift), mask);
      const __m256 y = _mm256_add_ps(off, _mm256_mul_ps(_mm256_cvtepi32_ps(q), step));
      _mm256_storeu_ps(d + i, add ? _mm256_add_ps(_mm256_loadu_ps(d + i), y) : y);
    }
  }
}

static int use_avx2(int64_t width) { return sc_simd_level() && width > 0 && width % 8 == 0; }
#else
static int use_avx2(int64_t width) { (void)width; return 0; }
#define quant_avx2 quant_base
#define dequant_avx2 dequant_base
#endif

void sc_quant_rows(const float *x, const float *ref, int64_t r0, int64_t r1, const int32_t *rows,
                   int64_t width, int bits, uint64_t key, const uint64_t *rowhash, uint8_t *dst,
                   float *dec, int add, int err_every, double *sums) {
  if (use_avx2(width))
    quant_avx2(x, ref, r0, r1, rows, width, bits, key, rowhash, dst, dec, add, err_every, sums);
  else
    quant_base(x, ref, r0, r1, rows, width, bits, key, rowhash, dst, dec, add, err_every, sums);
}

void sc_dequant_rows(const uint8_t *src, int64_t r0, int64_t r1, int64_t width, int bits, int add,
                     float *dst) {
  if (use_avx2(width))
    dequant_avx2(src, r0, r1, width, bits, add, dst);
  else
    dequant_base(src, r0, r1, width, bits, add, dst);
}

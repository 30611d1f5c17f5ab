// GAT's attention kernels of ../sancus.cu, run on the CPU through
// emulate.h, against the CPU's (../../gat.c for the softmax and the
// neighbour side, the Go kernels' arithmetic transcribed for the rest),
// with and without attention dropout, mean and concatenated heads, over
// two column blocks. Exits 1 on a mismatch; ../../cuda_emulation_test.go runs it.
#include "emulate.h"
#define sc_gat_attend gpu_sc_gat_attend
#include "../sancus.cu"
#undef sc_gat_attend
#include <vector>
#include <random>
#include <algorithm>
extern "C" {
#include "gat.h" // the CPU's attention
}
typedef std::vector<float> V;
static std::mt19937_64 rng(7);
static V rnd(size_t n, float sc = 1) { std::normal_distribution<float> d(0, sc); V v(n); for (auto &x : v) x = d(rng); return v; }
struct Blk { std::vector<long long> rp; std::vector<int> col; std::vector<int32_t> col32; std::vector<int64_t> rp64; int rows, cols; };
static Blk blk(int rows, int cols, int per) {
  Blk b; b.rows = rows; b.cols = cols; b.rp.push_back(0);
  for (int i = 0; i < rows; i++) {
    int k = (i % 5 == 2) ? 0 : (int)(rng() % (2 * per + 1));
    std::vector<int> cs; for (int t = 0; t < k; t++) cs.push_back(rng() % cols);
    std::sort(cs.begin(), cs.end()); cs.erase(std::unique(cs.begin(), cs.end()), cs.end());
    for (int c : cs) b.col.push_back(c);
    b.rp.push_back(b.col.size());
  }
  b.col32.assign(b.col.begin(), b.col.end()); b.rp64.assign(b.rp.begin(), b.rp.end());
  return b;
}
static double worst = 0; static int fails = 0;
static void cmp(const char *what, const V &got, const V &want, double tol) {
  double w = 0; size_t at = 0;
  for (size_t i = 0; i < want.size(); i++) {
    double d = std::fabs((double)got[i] - want[i]) / std::max(1.0, std::fabs((double)want[i]));
    if (std::isinf(want[i]) && got[i] == want[i]) d = 0;
    if (!(d <= w)) { w = d; at = i; }
  }
  printf("%-28s worst %.3g at %zu (got %g want %g)%s\n", what, w, at, got[at], want[at], w > tol ? "  FAIL" : "");
  if (w > tol) fails++;
}
int main() {
  for (int concat = 0; concat < 2; concat++)
  for (int drop = 0; drop < 2; drop++) {
    const int h = 3 + concat * 2, f = 5 + drop, hf = h * f, w = hf + h, gw = hf + 3 * h, R = 300;
    const uint64_t key = drop ? 0x1234567ull : 0; const float keep = drop ? 0.6f : 1.0f;
    unsigned thr = (unsigned)((1.0f - keep) * 65536.0f + 0.5f); float scale = 1.0f / keep;
    printf("== heads %d × %d, %s, %s\n", h, f, concat ? "concat" : "mean", drop ? "dropout" : "no dropout");
    // payload
    V u = rnd(R * hf), al = rnd(hf), ar = rnd(hf), pay(R * w), el(R * h), payR(R * w), elR(R * h);
    launch(nb((long long)R * w, 256), 256, [&] { sc_gat_payload(u.data(), al.data(), ar.data(), pay.data(), el.data(), R, h, f); });
    for (int i = 0; i < R; i++) { for (int j = 0; j < hf; j++) payR[i * w + j] = u[i * hf + j];
      for (int k = 0; k < h; k++) { float a = 0, b = 0; for (int x = 0; x < f; x++) { b += ar[k*f+x] * u[i*hf+k*f+x]; a += al[k*f+x] * u[i*hf+k*f+x]; }
        payR[i * w + hf + k] = b; elR[i * h + k] = a; } }
    cmp("payload", pay, payR, 1e-6); cmp("el", el, elR, 1e-6);
    // two column blocks of sources, targets = this rank's R rows
    std::vector<int64_t> tids(R); for (int i = 0; i < R; i++) tids[i] = 1000 + 3 * i;
    Blk b1 = blk(R, 200, 6), b2 = blk(R, 150, 4);
    V src1 = rnd(200 * w, 2), src2 = rnd(150 * w, 2);
    std::vector<int64_t> sids2(150); for (int i = 0; i < 150; i++) sids2[i] = 5000 + 7 * i;
    V m(R * h), s(R * h), o(R * hf), o2(R * hf), c(R * h);
    V mR(R * h, -INFINITY), sR(R * h, 0), oR(R * hf, 0), o2R(R * hf, 0), cR(R * h, 0);
    launch(nb((long long)R * hf, 256), 256, [&] { sc_gat_start(m.data(), s.data(), c.data(), o.data(), o2.data(), R, h, hf); });
    struct { Blk *b; V *src; const long long *sids; long long s0; } bl[2] = {{&b1, &src1, nullptr, 0}, {&b2, &src2, (long long *)sids2.data(), 0}};
    for (auto &x : bl) {
      long long rows = R, trow0 = 0, srow0 = x.s0;
      launch(nb(rows * h, 256), 256, [&] { sc_gat_max(x.b->rp.data(), x.b->col.data(), x.src->data(), h, f, el.data(), m.data(), s.data(), o.data(), o2.data(), c.data(), rows); });
      launch(nb(rows * hf, 256), 256, [&] { gpu_sc_gat_attend(x.b->rp.data(), x.b->col.data(), x.src->data(), h, f, el.data(), m.data(), s.data(), o.data(), o2.data(), c.data(), rows, key, thr, scale, (const i64 *)tids.data(), trow0, x.sids, srow0); });
      sc_gat_attend(x.b->rp64.data(), x.b->col32.data(), x.src->data(), h, f, elR.data(), mR.data(), sR.data(), oR.data(), o2R.data(), cR.data(), 0, R, key, keep, tids.data(), 0, (const int64_t *)x.sids, srow0);
    }
    cmp("m", m, mR, 1e-6); cmp("s", s, sR, 1e-5); cmp("o", o, oR, 1e-5); cmp("o2", o2, o2R, 1e-5); cmp("c", c, cR, 1e-5);
    // finish
    const int zc = concat ? hf : f;
    V z(R * zc), zR(R * zc, 0);
    launch(nb((long long)R * hf, 256), 256, [&] { sc_gat_norm(o.data(), s.data(), z.data(), R, h, f, concat); });
    if (!concat) launch(nb((long long)R * f, 256), 256, [&] { sc_gat_mean(o.data(), z.data(), R, h, f); });
    for (int i = 0; i < R; i++) { for (int k = 0; k < h; k++) if (sR[i*h+k] > 0) { float inv = 1 / sR[i*h+k]; for (int x = 0; x < f; x++) oR[i*hf+k*f+x] *= inv; }
      if (concat) for (int j = 0; j < hf; j++) zR[i*zc+j] = oR[i*hf+j];
      else { for (int x = 0; x < f; x++) { float v = 0; for (int k = 0; k < h; k++) v += oR[i*hf+k*f+x]; zR[i*zc+x] = v * (1.0f / h); } } }
    cmp("o normalized", o, oR, 1e-5); cmp("z", z, zR, 1e-5);
    // gradient rows
    V G = rnd(R * zc), gp(R * gw), dEl(R * h), gpR(R * gw), dElR(R * h);
    launch(nb((long long)R * h, 256), 256, [&] { sc_gat_grad_rows(gp.data(), dEl.data(), G.data(), el.data(), m.data(), s.data(), o.data(), o2.data(), c.data(), R, h, f, zc, concat); });
    for (int i = 0; i < R; i++) for (int k = 0; k < h; k++) {
      float *gk = &gpR[i * gw + k * f];
      for (int x = 0; x < f; x++) gk[x] = concat ? G[i*zc+k*f+x] : G[i*zc+x] * (1.0f / h);
      int ik = i * h + k, seg = i * hf + k * f;
      float lse = sR[ik] > 0 ? mR[ik] + (float)std::log((double)sR[ik]) : -INFINITY, d = 0, d2 = 0;
      for (int x = 0; x < f; x++) { d += gk[x] * oR[seg + x]; d2 += gk[x] * o2R[seg + x]; }
      gpR[i*gw+hf+k] = elR[ik]; gpR[i*gw+hf+h+k] = lse; gpR[i*gw+hf+2*h+k] = d;
      dElR[ik] = sR[ik] > 0 ? (d2 - d * cR[ik]) / sR[ik] : 0; }
    cmp("gradient rows", gp, gpR, 1e-4); cmp("dEl", dEl, dElR, 1e-4);
    // neighbour side: own rows = a block of 120 sources against these R targets
    const int O = 120; Blk nbk = blk(O, R, 5); V own = rnd(O * w, 2);
    // a target a source reaches must have a finite lse: drop edges to targets without neighbours
    { Blk t = nbk; t.col.clear(); t.rp.assign(1, 0);
      for (int r = 0; r < O; r++) { for (long long p = nbk.rp[r]; p < nbk.rp[r+1]; p++) if (sR[nbk.col[p]*h] > 0) t.col.push_back(nbk.col[p]); t.rp.push_back(t.col.size()); }
      t.col32.assign(t.col.begin(), t.col.end()); t.rp64.assign(t.rp.begin(), t.rp.end()); nbk = t; }
    std::vector<int64_t> oids(O); for (int i = 0; i < O; i++) oids[i] = 9000 + i * 11;
    V dU = rnd(O * hf), dEr = rnd(O * h), dUR = dU, dErR = dEr;
    launch(nb((long long)O * hf, 256), 256, [&] { sc_gat_neighbour_u(nbk.rp.data(), nbk.col.data(), gp.data(), h, f, own.data(), dU.data(), O, key, thr, scale, (const i64 *)oids.data(), 0, (const i64 *)tids.data(), 0); });
    launch(nb((long long)O * h, 256), 256, [&] { sc_gat_neighbour_er(nbk.rp.data(), nbk.col.data(), gp.data(), h, f, own.data(), dEr.data(), O, key, thr, scale, (const i64 *)oids.data(), 0, (const i64 *)tids.data(), 0); });
    sc_gat_neighbour(nbk.rp64.data(), nbk.col32.data(), gpR.data(), h, f, own.data(), dUR.data(), dErR.data(), 0, O, key, keep, oids.data(), 0, tids.data(), 0);
    cmp("neighbour dU", dU, dUR, 1e-4); cmp("neighbour dEr", dEr, dErR, 1e-4);
    // score gradients over the O rows (u: first hf of own, as a separate matrix)
    V uo(O * hf); for (int i = 0; i < O; i++) for (int j = 0; j < hf; j++) uo[i*hf+j] = own[i*w+j] * 0.5f;
    V dEl2 = rnd(O * h); V dAl(hf), dAr(hf), dAlR(hf, 0), dArR(hf, 0), dU2 = dU, dU2R = dU;
    const long long chunk = 50; const int chunks = (O + chunk - 1) / chunk; V part(2 * chunks * hf);
    launch(nb((long long)O * hf, 256), 256, [&] { sc_gat_score_u(dU2.data(), dEl2.data(), dEr.data(), al.data(), ar.data(), O, h, f); });
    launch(chunks, 128, [&] { sc_gat_score_vec(dEl2.data(), dEr.data(), uo.data(), own.data(), O, h, f, chunk, part.data()); });
    launch(nb(hf, 256), 256, [&] { sc_reduce_slabs(part.data(), chunks, hf, dAl.data(), 0); });
    launch(nb(hf, 256), 256, [&] { sc_reduce_slabs(part.data() + chunks * hf, chunks, hf, dAr.data(), 0); });
    for (int i = 0; i < O; i++) for (int k = 0; k < h; k++) { float gl = dEl2[i*h+k], gr = dEr[i*h+k];
      for (int x = 0; x < f; x++) { int j = k*f+x; dU2R[i*hf+j] += gl * al[j]; dU2R[i*hf+j] += gr * ar[j]; dAlR[j] += gl * uo[i*hf+j]; dArR[j] += gr * own[i*w+j]; } }
    cmp("score dU", dU2, dU2R, 1e-5); cmp("dAl", dAl, dAlR, 1e-4); cmp("dAr", dAr, dArR, 1e-4);
  }
  printf(fails ? "FAILED %d\n" : "all match\n", fails);
  return fails != 0;
}

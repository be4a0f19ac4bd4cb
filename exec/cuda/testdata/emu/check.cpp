// check.cpp runs kernels.cu's kernels under cuda_emu.h on small random
// problems and prints, per case, "CASE <name> <relative error>" against a
// float64 reference computed here from the same inputs (TestKernelsEmulated
// compiles and runs it and holds each error to its tolerance). Build:
//   g++ -std=c++20 -O1 -pthread -DTPSCOPE_EMU -include cuda_emu.h -x c++ kernels.cu check.cpp
#include <random>
#include <string>

#include "cuda_emu.h"

typedef unsigned short bf16_t;
#define MLA_DECL(name) extern "C" void name(const bf16_t*, const void*, bf16_t*, float*, float*, int*, float*, int, int, int, int, int, float, float, int);
MLA_DECL(mla_tc_bf16_r8_t64_s2)
MLA_DECL(mla_tc_bf16_r16_t64_s2)
MLA_DECL(mla_ds_fp8c_r16_t64_s4)
MLA_DECL(mla_ds_fp8_r8_t64_s4)
MLA_DECL(mla_ds_fp8_r16_t64_s4)
MLA_DECL(mla_ds_fp8c_r8_t64_s4_w16)
MLA_DECL(mla_ds_fp8c_r8_t64_s4_w16_b)
MLA_DECL(mla_ds_fp8c_r16_t64_s4_b)
typedef void (*floorfn)(const void*, bf16_t*, float*, float*, int*, unsigned*, int, int, int, int, int);
extern "C" void mla_floor_fp8(const void*, bf16_t*, float*, float*, int*, unsigned*, int, int, int, int, int);
extern "C" void mla_floor_bf16(const void*, bf16_t*, float*, float*, int*, unsigned*, int, int, int, int, int);
extern "C" void mla_combine(const float*, const float*, bf16_t*, int, int, int);
extern "C" void silu_mul(const bf16_t*, bf16_t*, int, int);
extern "C" void rmsnorm(const bf16_t*, bf16_t*, const bf16_t*, bf16_t*, int, float);
extern "C" void mla_dcp_correct(bf16_t*, const float*, const float*, int, int, int);
extern "C" void topk_router(const bf16_t*, int, int, int, int*, float*);

static std::mt19937_64 rng(12345);
static double uni() { return std::uniform_real_distribution<double>(-1, 1)(rng); }
static bf16_t tobf(double f) {
  float x = (float)f;
  unsigned u;
  memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (bf16_t)(u >> 16);
}
static double bf(bf16_t b) { return emu::bf2f_(b); }
static double e4m3(unsigned char b) {
  int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  double v = e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
  return s ? -v : v;
}
static double relerr(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); i++) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}
static void report(const std::string& name, double e) { printf("CASE %s %.6g\n", name.c_str(), e); }

typedef void (*mlafn)(const bf16_t*, const void*, bf16_t*, float*, float*, int*, float*, int, int, int, int, int, float, float, int);

// floor_check runs a bench floor kernel (mla_floor_*: rb-byte rows, tt-row
// tiles, 4 stages) over B sequences of S whole chunks of chunk tokens in
// each mode and checks, for the merge (mode 1), out against the mean of
// the S staged partials, each derived from the cache as the kernel
// stages it (element i of a block's partial: bit i % 16 of the XOR of
// word i % 512 of its tiles; every log-sum-exp 0, so each split weighs
// 1/S), and for every mode that the arrivals are back at zero.
static void floor_check(const char* kname, floorfn fn, int rb, int tt, int B, int S, int chunk) {
  const int H = 8, DV = 512, NTH = 512, ctx = S * chunk;
  std::vector<unsigned char> kv((size_t)B * ctx * rb);
  for (auto& b : kv) b = (unsigned char)rng();
  std::vector<bf16_t> out(B * H * DV);
  std::vector<float> opart((size_t)S * B * H * DV), lse((size_t)S * B * H);
  std::vector<int> sem(2 * B, 0);
  unsigned sink = 0;
  bool reset = true;
  std::vector<double> got, want;
  for (int mode = 0; mode <= 4; mode++) {
    std::fill(out.begin(), out.end(), (bf16_t)0xffff);
    emu::launch(dim3{(unsigned)S, 1, (unsigned)B}, dim3{(unsigned)NTH, 1, 1}, (size_t)4 * tt * rb + 32, [&] {
      fn(kv.data(), out.data(), opart.data(), lse.data(), sem.data(), &sink, B, H, ctx, chunk, mode);
    });
    for (int v : sem) reset &= v == 0;
    if (mode != 1) continue;
    for (int seq = 0; seq < B; seq++)
      for (int r = 0; r < H; r++)
        for (int c = 0; c < DV; c++) {
          double m = 0;
          for (int sp = 0; sp < S; sp++) {
            const int i = r * (DV + 4) + c;
            unsigned x = 0;
            for (int t = 0; t < chunk / tt; t++) {
              unsigned w;
              memcpy(&w, &kv[((size_t)seq * ctx + sp * chunk + t * tt) * rb + 4 * (i % NTH)], 4);
              x ^= w;
            }
            m += ((x >> (i & 15)) & 1u) / (double)S;
          }
          want.push_back(m);
          got.push_back(bf(out[(seq * H + r) * DV + c]));
        }
  }
  char name[200];
  snprintf(name, sizeof name, "%s/B=%d/S=%d/chunk=%d", kname, B, S, chunk);
  report(std::string(name) + "/merge", relerr(got, want));
  report(std::string(name) + "/sem-reset", reset ? 0 : 1);
}

// mla runs one launch (and mla_combine when split > 1 without coop) and
// checks the output, and the row log-sum-exps when lseOut is asked for.
// coop: 0 mla_combine merges, 1 the kernel merges through device memory,
// 2 through its clusters' shared memory (one cluster per S splits).
// The kernel takes R rows per block and 64-token tiles through ns stages
// with nth threads, its shared memory laid out as kernels.cu's MlaTC (bf16)
// or MlaDS (fp8, the stages' mbarriers last).
static void mla(const char* kname, mlafn fn, bool fp8, int ns, int T, int H, int tps, int ctx, int S, int coop, float scale, int R, int nth = 256, int tt = 64) {
  const int D = 576, DV = 512, B = T / tps;
  std::vector<bf16_t> q(T * H * D);
  for (auto& x : q) x = tobf(uni());
  std::vector<double> kvf((size_t)B * ctx * D);
  std::vector<unsigned char> kv8;
  std::vector<bf16_t> kv16;
  const float kscale = fp8 ? 0.37f : 1.f;
  if (fp8) {
    kv8.resize(kvf.size());
    for (size_t i = 0; i < kv8.size(); i++) {
      kv8[i] = (unsigned char)(rng() & 0xBF);
      kvf[i] = e4m3(kv8[i]) * kscale;
    }
  } else {
    kv16.resize(kvf.size());
    for (size_t i = 0; i < kv16.size(); i++) {
      kv16[i] = tobf(uni());
      kvf[i] = bf(kv16[i]);
    }
  }
  int chunk = (ctx + S - 1) / S;
  S = (ctx + chunk - 1) / chunk;
  const int rowsPerSeq = tps * H, groups = (rowsPerSeq + R - 1) / R;
  std::vector<bf16_t> out(T * H * DV, 0xffff);  // poison: NaN
  std::vector<float> opart((size_t)S * T * H * DV, NAN), lse((size_t)S * T * H, NAN), lseOut(T * H, NAN);
  std::vector<int> sem(2 * B * groups, 0);
  size_t smem;
  if (!fp8) {  // MlaTC: Q, stages of 1168-byte rows, partial scores [8/(TT/16)][TT][R+1] (16-byte padded), P [R][TT+8], scalars
    const size_t np = nth / 32 / (tt / 16), spb = (np * tt * (R + 1) * 4 + 15) / 16 * 16;
    smem = (size_t)R * (D + 8) * 2 + ns * tt * 2 * (D + 8) + spb + R * (tt + 8) * 2 + 3 * R * 4;
  } else {  // MlaDS: Q, stages of raw rows (576 bytes), partial scores [8][TT][R+1], P, scalars per token half, mbarriers
    const size_t spb = (8 * tt * (R + 1) * 4 + 15) / 16 * 16;
    smem = (size_t)R * (D + 8) * 2 + ns * tt * D + spb + R * (tt + 8) * 2 + 3 * R * 4 * (nth / 256) + ns * 8;
  }
  const void* kvp = fp8 ? (const void*)kv8.data() : (const void*)kv16.data();
  emu::launch(dim3{(unsigned)S, (unsigned)groups, (unsigned)B}, dim3{(unsigned)nth, 1, 1}, smem, [&] {
    fn(q.data(), kvp, out.data(), opart.data(), lse.data(), sem.data(), lseOut.data(), T, H, ctx, tps, chunk, scale, kscale, coop);
  }, coop == 2 ? S : 1);
  if (S > 1 && !coop)
    emu::launch(dim3{(unsigned)(T * H), 1, 1}, dim3{128, 1, 1}, 0, [&] { mla_combine(opart.data(), lse.data(), out.data(), T * H, S, DV); });
  std::vector<double> got, want, lgot, lwant;
  for (int t = 0; t < T; t++) {
    int seq = t / tps;
    for (int h = 0; h < H; h++) {
      std::vector<double> sc(ctx);
      double mx = -INFINITY;
      for (int j = 0; j < ctx; j++) {
        double s = 0;
        for (int d = 0; d < D; d++) s += bf(q[(t * H + h) * D + d]) * kvf[((size_t)seq * ctx + j) * D + d];
        sc[j] = s * scale;
        mx = std::max(mx, sc[j]);
      }
      double l = 0;
      for (auto& x : sc) l += (x = std::exp(x - mx));
      for (int c = 0; c < DV; c++) {
        double v = 0;
        for (int j = 0; j < ctx; j++) v += sc[j] * kvf[((size_t)seq * ctx + j) * D + c];
        want.push_back(v / l);
        got.push_back(bf(out[(t * H + h) * DV + c]));
      }
      lwant.push_back(mx + std::log(l));
      lgot.push_back(lseOut[t * H + h]);
    }
  }
  char name[200];
  snprintf(name, sizeof name, "%s/T=%d/H=%d/tps=%d/ctx=%d/S=%d/coop=%d", kname, T, H, tps, ctx, S, coop);
  report(name, relerr(got, want));
  if (S == 1 || coop) report(std::string(name) + "/lse", relerr(lgot, lwant));
  bool reset = true;
  for (size_t i = 0; i < sem.size(); i += 2) reset &= sem[i] == 0 && sem[i + 1] == 0;  // arrivals back to 0, the spare word untouched
  if (coop && S > 1) report(std::string(name) + "/sem-reset", reset ? 0 : 1);
}

int main(int argc, char** argv) {
  std::string only = argc > 1 ? argv[1] : "";
  auto want = [&](const char* k) { return only.empty() || only == k; };
  if (want("e4m3")) {  // the widenings, every byte
    double worst = 0;
    for (unsigned b = 0; b < 256; b++) {
      if ((b & 0x7f) == 0x7f) continue;
      unsigned lo, hi;
      e4m3x4h(b | (b << 8) | (b << 16) | (b << 24), lo, hi);
      for (unsigned h : {lo & 0xffff, lo >> 16, hi & 0xffff, hi >> 16}) worst = std::max(worst, std::fabs(emu::h2f(h) - e4m3(b)));
    }
    report("e4m3x4h/all-bytes", worst);
    worst = 0;
    for (unsigned b = 0; b < 256; b++) {
      if ((b & 0x7f) == 0x7f) continue;
      // kernels.cu's e4m3x4h8 (a device function), its lo half
      const unsigned w = b | (b << 8), t = __byte_perm(w, 0u, 0x1404u);
      const unsigned lo = (t & 0x80008000u) | ((t >> 1) & 0x3f803f80u);
      for (unsigned h : {lo & 0xffff, lo >> 16}) worst = std::max(worst, std::fabs(emu::h2f(h) * 256 - e4m3(b)));
    }
    report("e4m3x4h8/all-bytes", worst);
  }
  if (want("mla")) {
    // Kimi-K2.5 TP8 shapes (8 heads: one row group of 8): splits merged
    // in the kernel, by mla_combine, and none; partial last tiles; MTP (2
    // tokens per sequence: 16 rows); 20 heads (row groups of 8 or 16, the
    // last partial); 64 heads (four groups of 16); many splits (the warp
    // merge); fp8 caches with a 0.37 scale, widened by the conversion
    // instruction (fp8c) or by bit moves.
    mla("tc_bf16_r8", mla_tc_bf16_r8_t64_s2, false, 2, 2, 8, 1, 200, 3, true, 0.0722f, 8);
    mla("tc_bf16_r8", mla_tc_bf16_r8_t64_s2, false, 2, 2, 8, 1, 200, 3, false, 0.0722f, 8);
    mla("tc_bf16_r8", mla_tc_bf16_r8_t64_s2, false, 2, 1, 20, 1, 150, 1, false, 0.0722f, 8);
    mla("tc_bf16_r8", mla_tc_bf16_r8_t64_s2, false, 2, 1, 8, 1, 1100, 34, true, 0.0722f, 8);
    mla("tc_bf16_r16", mla_tc_bf16_r16_t64_s2, false, 2, 4, 8, 2, 150, 2, true, 0.25f, 16);
    mla("tc_bf16_r16", mla_tc_bf16_r16_t64_s2, false, 2, 1, 20, 1, 70, 2, true, 0.0722f, 16);
    mla("tc_bf16_r16", mla_tc_bf16_r16_t64_s2, false, 2, 1, 64, 1, 90, 2, false, 0.0722f, 16);
    mla("ds_fp8c_r8_w16", mla_ds_fp8c_r8_t64_s4_w16, true, 4, 1, 20, 1, 150, 1, false, 0.0722f, 8, 512);
    mla("ds_fp8c_r16", mla_ds_fp8c_r16_t64_s4, true, 4, 4, 8, 2, 100, 2, true, 0.25f, 16);
    mla("ds_fp8_r8", mla_ds_fp8_r8_t64_s4, true, 4, 2, 8, 1, 300, 2, false, 0.0722f, 8);
    mla("ds_fp8_r16", mla_ds_fp8_r16_t64_s4, true, 4, 1, 64, 1, 90, 2, true, 0.0722f, 16);
    // 16 warps: two halves of each tile's tokens.
    mla("ds_fp8c_r8_w16", mla_ds_fp8c_r8_t64_s4_w16, true, 4, 2, 8, 1, 200, 3, true, 0.0722f, 8, 512);
    mla("ds_fp8c_r8_w16", mla_ds_fp8c_r8_t64_s4_w16, true, 4, 4, 8, 2, 100, 2, false, 0.25f, 8, 512);
    // 8 and 16 splits: the merge whose partials are loaded with the
    // log-sum-exps (S <= 16, the block's items fit its threads).
    mla("tc_bf16_r8", mla_tc_bf16_r8_t64_s2, false, 2, 2, 8, 1, 600, 8, true, 0.0722f, 8);
    mla("ds_fp8c_r8_w16", mla_ds_fp8c_r8_t64_s4_w16, true, 4, 1, 8, 1, 520, 16, true, 0.0722f, 8, 512);
    // Tiles by one bulk copy on an mbarrier (_b): partial last tiles
    // zeroed; stages reused (more tiles than stages); 20 heads, MTP rows.
    mla("ds_fp8c_r8_w16_b", mla_ds_fp8c_r8_t64_s4_w16_b, true, 4, 2, 8, 1, 700, 2, true, 0.0722f, 8, 512);
    mla("ds_fp8c_r8_w16_b", mla_ds_fp8c_r8_t64_s4_w16_b, true, 4, 1, 20, 1, 150, 1, false, 0.0722f, 8, 512);
    mla("ds_fp8c_r16_b", mla_ds_fp8c_r16_t64_s4_b, true, 4, 4, 8, 2, 100, 2, true, 0.25f, 16);
    // The splits as a thread-block cluster merging from each other's
    // shared memory (coop 2): 8 and 16 splits (the merge that loads its
    // partials with the log-sum-exps), 16 rows of MTP, 20 heads (three
    // row groups, the last partial) in 3 splits.
    mla("tc_bf16_r8", mla_tc_bf16_r8_t64_s2, false, 2, 2, 8, 1, 600, 8, 2, 0.0722f, 8);
    mla("ds_fp8c_r8_w16_b", mla_ds_fp8c_r8_t64_s4_w16_b, true, 4, 1, 8, 1, 520, 16, 2, 0.0722f, 8, 512);
    mla("tc_bf16_r16", mla_tc_bf16_r16_t64_s2, false, 2, 4, 8, 2, 150, 2, 2, 0.25f, 16);
    mla("ds_fp8c_r8_w16_b", mla_ds_fp8c_r8_t64_s4_w16_b, true, 4, 1, 20, 1, 300, 3, 2, 0.0722f, 8, 512);
    // The bench's floor kernels: the merge they time is the kernels' own.
    floor_check("floor_fp8", mla_floor_fp8, 576, 64, 2, 3, 320);
    floor_check("floor_bf16", mla_floor_bf16, 1152, 32, 2, 3, 160);
  }
  if (want("silu")) {
    for (int d : {256, 2304, 100}) {
      int rows = 5;
      std::vector<bf16_t> in(rows * 2 * d), out(rows * d, 0xffff);
      for (auto& x : in) x = tobf(uni() * 4);
      emu::launch(dim3{3, 1, 1}, dim3{64, 1, 1}, 0, [&] { silu_mul(in.data(), out.data(), rows, d); });
      std::vector<double> got, wantv;
      for (int r = 0; r < rows; r++)
        for (int c = 0; c < d; c++) {
          double a = bf(in[r * 2 * d + c]), u = bf(in[r * 2 * d + d + c]);
          wantv.push_back(a / (1 + std::exp(-a)) * u);
          got.push_back(bf(out[r * d + c]));
        }
      report("silu_mul/d=" + std::to_string(d), relerr(got, wantv));
    }
  }
  if (want("rmsnorm")) {
    for (int cols : {7168, 1536, 100}) {
      int rows = 3;
      std::vector<bf16_t> x(rows * cols), res(rows * cols), w(cols), y(rows * cols, 0xffff);
      for (auto& v : x) v = tobf(uni());
      for (auto& v : res) v = tobf(uni());
      for (auto& v : w) v = tobf(uni());
      std::vector<bf16_t> res0 = res;
      emu::launch(dim3{(unsigned)rows, 1, 1}, dim3{256, 1, 1}, 0, [&] { rmsnorm(x.data(), res.data(), w.data(), y.data(), cols, 1e-6f); });
      std::vector<double> got, wantv, rgot, rwant;
      for (int r = 0; r < rows; r++) {
        double ss = 0;
        std::vector<double> s(cols);
        for (int c = 0; c < cols; c++) {
          s[c] = bf(x[r * cols + c]) + bf(res0[r * cols + c]);
          ss += s[c] * s[c];
        }
        double inv = 1 / std::sqrt(ss / cols + 1e-6);
        for (int c = 0; c < cols; c++) {
          wantv.push_back(s[c] * inv * bf(w[c]));
          got.push_back(bf(y[r * cols + c]));
          rwant.push_back(s[c]);
          rgot.push_back(bf(res[r * cols + c]));
        }
      }
      report("rmsnorm_add/cols=" + std::to_string(cols), relerr(got, wantv));
      report("rmsnorm_add/residual/cols=" + std::to_string(cols), relerr(rgot, rwant));
    }
  }
  if (want("dcp")) {
    const int rows = 6, k = 4, dv = 512;
    std::vector<bf16_t> o(rows * dv), o0;
    for (auto& v : o) v = tobf(uni());
    o0 = o;
    std::vector<float> lse(rows), all(k * rows);
    for (auto& v : all) v = (float)(uni() * 3);
    for (int r = 0; r < rows; r++) lse[r] = all[1 * rows + r];  // this rank is rank 1
    emu::launch(dim3{(unsigned)((rows + 3) / 4), 1, 1}, dim3{256, 1, 1}, 0, [&] { mla_dcp_correct(o.data(), lse.data(), all.data(), rows, k, dv); });
    std::vector<double> got, wantv;
    for (int r = 0; r < rows; r++) {
      double s = 0;
      for (int j = 0; j < k; j++) s += std::exp((double)all[j * rows + r]);
      double f = std::exp(lse[r]) / s;
      for (int c = 0; c < dv; c++) {
        wantv.push_back(bf(o0[r * dv + c]) * f);
        got.push_back(bf(o[r * dv + c]));
      }
    }
    report("mla_dcp_correct", relerr(got, wantv));
  }
  if (want("router")) {
    const int T = 3, E = 384, k = 8;
    std::vector<bf16_t> x(T * E);
    for (auto& v : x) v = tobf(uni());
    std::vector<int> ids(T * k, -1);
    std::vector<float> w(T * k, NAN);
    emu::launch(dim3{1, 1, 1}, dim3{128, 1, 1}, 0, [&] { topk_router(x.data(), T, E, k, ids.data(), w.data()); });
    int bad = 0;
    for (int t = 0; t < T; t++) {
      std::vector<double> row(E);
      for (int e = 0; e < E; e++) row[e] = bf(x[t * E + e]);
      std::vector<double> sorted = row;
      std::sort(sorted.rbegin(), sorted.rend());
      for (int j = 0; j < k; j++)
        if (ids[t * k + j] < 0 || ids[t * k + j] >= E || row[ids[t * k + j]] != sorted[j] || w[t * k + j] != sorted[j]) bad++;
    }
    report("topk_router/bad-picks", bad);
  }
  return 0;
}

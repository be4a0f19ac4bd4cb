// cuda_emu.h runs tpscope's CUDA kernels (exec/cuda/kernels/kernels.cu,
// compiled as C++20 with -DTPSCOPE_EMU after this header) on the CPU, one
// std::thread per CUDA thread and every block of a launch at once, so that
// blocks may wait for each other as they do on a GPU whose launch fits.
//
// What is emulated, and how:
//   - __syncthreads: a std::barrier per block; a thread that returns drops
//     out of its block's and warp's barriers, as exited threads do.
//   - warp collectives (__shfl_xor_sync, ldmatrix, mma.sync m16n8k16): the
//     32 lanes publish their operands in a per-warp scratch, meet at a warp
//     barrier, each computes its own result from the PTX ISA's fragment
//     layouts, and meet again before the scratch is reused.
//   - cp.async: each copy is queued in its thread's open group and done
//     when a cp.async.wait_group lets its group complete, so code that reads
//     a stage before waiting reads stale data, as it would on the device.
//   - atomics and fences: the compiler's __atomic built-ins.
//   - shared memory: BLOCK_SMEM arrays and DYN_SMEM get one buffer per block.
// fp32 products in mma are summed in float in k order (the device's order
// and rounding differ in the last bits).
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace emu {
using u32 = unsigned int;
using u64 = unsigned long long;

struct Warp {
  std::unique_ptr<std::barrier<>> bar;
  u64 slot[32][8];
};
struct Block {
  std::unique_ptr<std::barrier<>> bar;
  std::vector<Warp> warps;
  std::vector<unsigned char> dyn;
  std::mutex mu;
  std::map<int, std::vector<unsigned char>> stat;
  // Thread-block cluster (launch's cluster > 1): the cluster's barrier,
  // its blocks in rank order, this block's rank.
  std::barrier<>* cbar = nullptr;
  std::vector<Block*> cluster;
  unsigned crank = 0;
};
struct Copy {
  void* dst;
  const void* src;
  int n;
};

inline thread_local dim3 tid_, bid_;
inline thread_local Block* blk_;
inline thread_local int lane_, warp_;
inline thread_local std::vector<Copy> open_;
inline thread_local std::vector<std::vector<Copy>> groups_;
inline dim3 gdim_, bdim_;

inline Warp& W() { return blk_->warps[warp_]; }
inline void wsync() { W().bar->arrive_and_wait(); }

inline unsigned char* dyn_smem() { return blk_->dyn.data(); }
inline void* block_static(int id, size_t bytes) {
  std::lock_guard<std::mutex> l(blk_->mu);
  auto& v = blk_->stat[id];
  if (v.empty()) v.assign(bytes + 16, 0);
  return v.data();
}

// launch runs fn() on grid x block threads and returns when all are done.
// cluster > 1: blocks x = k cluster .. k cluster + cluster - 1 (same y, z)
// form a thread-block cluster of that many blocks, rank x mod cluster.
inline void launch(dim3 grid, dim3 block, size_t smem, const std::function<void()>& fn, unsigned cluster = 1) {
  const unsigned nb = grid.x * grid.y * grid.z, nt = block.x * block.y * block.z;
  if (nt % 32 != 0) {
    fprintf(stderr, "emu: block of %u threads: want a multiple of 32\n", nt);
    abort();
  }
  gdim_ = grid;
  bdim_ = block;
  std::vector<std::unique_ptr<Block>> blocks(nb);
  for (auto& b : blocks) {
    b = std::make_unique<Block>();
    b->bar = std::make_unique<std::barrier<>>(nt);
    b->warps.resize(nt / 32);
    for (auto& w : b->warps) w.bar = std::make_unique<std::barrier<>>(32);
    b->dyn.assign(smem + 16, 0xFF);  // poison (NaN as e4m3, bf16 and fp32): code must write before it reads
  }
  if (cluster < 1 || grid.x % cluster) {
    fprintf(stderr, "emu: cluster of %u blocks does not divide grid x %u\n", cluster, grid.x);
    abort();
  }
  std::vector<std::unique_ptr<std::barrier<>>> cbars;
  if (cluster > 1) {
    for (unsigned b = 0; b < nb; b += cluster) {
      cbars.push_back(std::make_unique<std::barrier<>>(cluster * nt));
      for (unsigned k = 0; k < cluster; k++) {
        Block* B = blocks[b + k].get();
        B->cbar = cbars.back().get();
        B->crank = k;
        for (unsigned j = 0; j < cluster; j++) B->cluster.push_back(blocks[b + j].get());
      }
    }
  }
  std::vector<std::thread> th;
  th.reserve((size_t)nb * nt);
  for (unsigned b = 0; b < nb; b++) {
    for (unsigned t = 0; t < nt; t++) {
      th.emplace_back([&, b, t] {
        Block* B = blocks[b].get();
        blk_ = B;
        bid_ = dim3{b % grid.x, (b / grid.x) % grid.y, b / (grid.x * grid.y)};
        tid_ = dim3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        lane_ = t & 31;
        warp_ = t >> 5;
        open_.clear();
        groups_.clear();
        fn();
        B->warps[warp_].bar->arrive_and_drop();
        B->bar->arrive_and_drop();
        if (B->cbar) B->cbar->arrive_and_drop();
      });
    }
  }
  for (auto& x : th) x.join();
}

inline float h2f(u32 h) {
  u32 s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float v;
  if (e == 0) v = std::ldexp((float)m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp((float)(m | 0x400u), (int)e - 25);
  return s ? -v : v;
}
inline float bf2f_(u32 b) {
  u32 x = (b & 0xffffu) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
}  // namespace emu

#define threadIdx emu::tid_
#define blockIdx emu::bid_
#define blockDim emu::bdim_
#define gridDim emu::gdim_
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define BLOCK_SMEM(T, name, n) T* name = (T*)emu::block_static(__COUNTER__, sizeof(T) * (n))
#define DYN_SMEM(T, name) T* name = (T*)emu::dyn_smem()

inline void __syncthreads() { emu::blk_->bar->arrive_and_wait(); }
inline float __uint_as_float(unsigned x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned x;
  memcpy(&x, &f, 4);
  return x;
}
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __frsqrt_rn(float x) { return 1.f / std::sqrt(x); }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = (unsigned long long)x | ((unsigned long long)y << 32);
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int o) {
  static_assert(sizeof(T) <= 8);
  auto& w = emu::W();
  memcpy(&w.slot[emu::lane_][7], &v, sizeof(T));
  emu::wsync();
  T r;
  memcpy(&r, &w.slot[emu::lane_ ^ o][7], sizeof(T));
  emu::wsync();
  return r;
}
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// clock64 ticks every 20 ns: the kernels' deadlock guards (2^33 ticks)
// then wait about 3 minutes, as thousands of emulated threads on a loaded
// 2-core machine can keep a block from arriving for many seconds.
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count() / 20;
}

// The PTX twins of kernels.cu.
typedef unsigned long long saddr_t;
inline saddr_t smem_addr(const void* p) { return (saddr_t)(uintptr_t)p; }
inline void cp16(saddr_t dst, const void* src, int n) { emu::open_.push_back({(void*)(uintptr_t)dst, src, n}); }
inline void cp_commit() {
  emu::groups_.push_back(std::move(emu::open_));
  emu::open_.clear();
}
template <int N>
inline void cp_wait() {
  while ((int)emu::groups_.size() > N) {
    for (auto& c : emu::groups_.front()) {
      if (c.n) memcpy(c.dst, c.src, 16);
      else memset(c.dst, 0, 16);
    }
    emu::groups_.erase(emu::groups_.begin());
  }
}
// ldmatrix .x4: lanes 8m..8m+7 give the row addresses of matrix m; lane l
// gets row l/4, 16-bit columns 2(l%4), 2(l%4)+1 of each (transposed: rows
// 2(l%4), 2(l%4)+1 of column l/4).
inline void ldsm4_(saddr_t a, unsigned* r, bool trans) {
  auto& w = emu::W();
  const int l = emu::lane_;
  w.slot[l][0] = a;
  emu::wsync();
  for (int m = 0; m < 4; m++) {
    if (!trans) {
      memcpy(&r[m], (const void*)(uintptr_t)(w.slot[8 * m + l / 4][0] + (l % 4) * 4), 4);
    } else {
      unsigned short lo, hi;
      memcpy(&lo, (const void*)(uintptr_t)(w.slot[8 * m + 2 * (l % 4)][0] + 2 * (l / 4)), 2);
      memcpy(&hi, (const void*)(uintptr_t)(w.slot[8 * m + 2 * (l % 4) + 1][0] + 2 * (l / 4)), 2);
      r[m] = lo | ((unsigned)hi << 16);
    }
  }
  emu::wsync();
}
inline void ldsm4(saddr_t a, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  unsigned r[4];
  ldsm4_(a, r, false);
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
inline void ldsm4t(saddr_t a, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  unsigned r[4];
  ldsm4_(a, r, true);
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
// movmatrix.m8n8.trans.b16: lane l holds row l/4, 16-bit columns
// 2(l%4), 2(l%4)+1 of an 8x8 matrix M and gets the same of M's transpose,
// i.e. M[2(l%4)][l/4] and M[2(l%4)+1][l/4].
inline unsigned movt(unsigned a) {
  auto& w = emu::W();
  const int l = emu::lane_;
  w.slot[l][0] = a;
  emu::wsync();
  auto el = [&](int r, int c) {
    unsigned x = (unsigned)w.slot[4 * r + c / 2][0];
    return (c & 1) ? x >> 16 : x & 0xffffu;
  };
  const int r = l / 4, c = 2 * (l % 4);
  unsigned d = el(c, r) | (el(c + 1, r) << 16);
  emu::wsync();
  return d;
}
// mma.m16n8k16 .row.col, g = lane/4, t = lane%4:
//   A a0 (g, 2t..2t+1) a1 (g+8, 2t..) a2 (g, 8+2t..) a3 (g+8, 8+2t..)
//   B b0 (k 2t..2t+1, n g) b1 (k 8+2t.., n g)
//   C c0 c1 (g, 2t..2t+1) c2 c3 (g+8, 2t..2t+1)
template <bool HALF>
inline void mma16816(float* c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  auto& w = emu::W();
  const int l = emu::lane_;
  unsigned v[6] = {a0, a1, a2, a3, b0, b1};
  for (int i = 0; i < 6; i++) w.slot[l][i] = v[i];
  emu::wsync();
  auto el = [&](int lane, int reg, int hiHalf) {
    unsigned x = (unsigned)w.slot[lane][reg];
    unsigned h = hiHalf ? x >> 16 : x & 0xffffu;
    return HALF ? emu::h2f(h) : emu::bf2f_(h);
  };
  auto A = [&](int row, int k) { return el((row % 8) * 4 + (k % 8) / 2, (k < 8 ? 0 : 2) + row / 8, k & 1); };
  auto B = [&](int k, int n) { return el(n * 4 + (k % 8) / 2, k < 8 ? 4 : 5, k & 1); };
  const int g = l / 4, t = l % 4;
  float out[4];
  for (int j = 0; j < 4; j++) {
    int row = g + (j >= 2 ? 8 : 0), col = 2 * t + (j & 1);
    float s = c[j];
    for (int k = 0; k < 16; k++) s += A(row, k) * B(k, col);
    out[j] = s;
  }
  emu::wsync();
  for (int j = 0; j < 4; j++) c[j] = out[j];
}
struct alignas(16) emu_v4 {
  unsigned x, y, z, w;
};
inline emu_v4 ldcg4_(const float* p) {
  emu_v4 r;
  memcpy(&r, p, 16);
  return r;
}
#define ldcg4(p) ({ auto _r = ldcg4_(p); v4{_r.x, _r.y, _r.z, _r.w}; })
inline float ldcg1(const float* p) { return *p; }
// mbarrier and cp.async.bulk: a barrier (keyed by its address) counts
// its completed phases; a phase completes once its expected arrivals have
// arrived and every byte announced by expect_tx has been copied. A bulk
// copy is done when it is issued (a legal schedule of an asynchronous
// copy); waiters block until the phase of the parity they name completes.
namespace emu {
struct MBar {
  int count = 0, pending = 0;
  long long tx = 0;
  std::atomic<unsigned> phase{0};
};
inline std::mutex mbarMu_;
inline std::map<void*, std::unique_ptr<MBar>> mbars_;
inline MBar& mbar(saddr_t b) {
  std::lock_guard<std::mutex> l(mbarMu_);
  auto& m = mbars_[(void*)(uintptr_t)b];
  if (!m) m = std::make_unique<MBar>();
  return *m;
}
inline void mbar_step(MBar& m) {  // under mbarMu_
  if (m.pending == 0 && m.tx == 0) {
    m.pending = m.count;
    m.phase.fetch_add(1);
  }
}
}  // namespace emu
inline void mbar_init(saddr_t b, int count) {
  auto& m = emu::mbar(b);
  std::lock_guard<std::mutex> l(emu::mbarMu_);
  m.count = m.pending = count;
  m.tx = 0;
  m.phase.store(0);
}
inline void fence_async() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void mbar_expect(saddr_t b, unsigned bytes) {
  auto& m = emu::mbar(b);
  std::lock_guard<std::mutex> l(emu::mbarMu_);
  m.tx += bytes;
  m.pending--;
  emu::mbar_step(m);
}
inline void bulk_load(saddr_t dst, const void* src, unsigned bytes, saddr_t b) {
  if (bytes % 16 || dst % 16 || (uintptr_t)src % 16) {
    fprintf(stderr, "emu: cp.async.bulk of %u bytes %p -> %llx: want multiples of 16\n", bytes, src, dst);
    abort();
  }
  memcpy((void*)(uintptr_t)dst, src, bytes);
  auto& m = emu::mbar(b);
  std::lock_guard<std::mutex> l(emu::mbarMu_);
  m.tx -= bytes;
  emu::mbar_step(m);
}
inline void mbar_wait(saddr_t b, unsigned parity) {
  auto& m = emu::mbar(b);
  const long long t0 = clock64();
  while ((m.phase.load() & 1u) == parity) {
    std::this_thread::yield();
    if (clock64() - t0 > (1ll << 33)) {
      fprintf(stderr, "emu: mbarrier wait for parity %u never completed\n", parity);
      abort();
    }
  }
}
// Clusters: the barrier of the launch's cluster; dsmem maps an address in
// this block's dynamic shared memory to the same offset in the block of
// the given rank (an address outside it, or a launch without clusters,
// aborts, as the GPU faults).
inline void cluster_sync() {
  if (!emu::blk_->cbar) {
    fprintf(stderr, "emu: barrier.cluster in a launch without clusters\n");
    abort();
  }
  emu::blk_->cbar->arrive_and_wait();
}
inline unsigned cluster_blocks() { return emu::blk_->cbar ? (unsigned)emu::blk_->cluster.size() : 1u; }
inline saddr_t dsmem(saddr_t a, unsigned rank) {
  auto& d = emu::blk_->dyn;
  const uintptr_t base = (uintptr_t)d.data();
  if (!emu::blk_->cbar || rank >= emu::blk_->cluster.size() || a < base || a >= base + d.size()) {
    fprintf(stderr, "emu: mapa of %llx to cluster rank %u: outside this block's shared memory or cluster\n", a, rank);
    abort();
  }
  return (saddr_t)((uintptr_t)emu::blk_->cluster[rank]->dyn.data() + (a - base));
}
#define ld_dsmem4(a) ({ auto _r = ldcg4_((const float*)(uintptr_t)(a)); v4{_r.x, _r.y, _r.z, _r.w}; })
inline float ld_dsmem1(saddr_t a) { return *(const float*)(uintptr_t)a; }
inline unsigned long long gtime() { return (unsigned long long)clock64() * 20; }
inline unsigned smid() { return 0; }
inline void nap() { std::this_thread::yield(); }
inline int ld_acquire(const int* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void die() {
  fprintf(stderr, "emu: trap (a block waited for seconds)\n");
  abort();
}
// cvt.rn.f16x2.e4m3x2, emulated exactly (byte 0 to the low half; the
// NaN bytes 0x7f and 0xff to a half NaN).
inline unsigned e4m3_to_h_(unsigned b) {
  unsigned s = (b & 0x80u) << 8, e = (b >> 3) & 0xfu, m = b & 7u;
  if ((b & 0x7fu) == 0x7fu) return s | 0x7e00u;
  if (e) return s | ((e + 8u) << 10) | (m << 7);
  if (!m) return s;
  int k = 0;  // subnormal e4m3 m x 2^-9: a normal half
  while (!(m & 8u)) m <<= 1, k++;
  return s | ((unsigned)(15 - 6 - k) << 10) | ((m & 7u) << 7);
}
inline void e4m3x4h(unsigned w, unsigned& lo, unsigned& hi) {
  lo = e4m3_to_h_(w & 0xff) | (e4m3_to_h_((w >> 8) & 0xff) << 16);
  hi = e4m3_to_h_((w >> 16) & 0xff) | (e4m3_to_h_(w >> 24) << 16);
}
inline float fexp2(float x) { return std::exp2(x); }
inline float flog2(float x) { return std::log2(x); }

// gpu-moe-helpers.cu: what the bookkeeping kernels around a grouped-GEMM
// MoE layer cost at decode, one kernel node each in a CUDA graph.
//
// tpscope prices the kernels an engine launches beside a fused MoE's GEMMs
// (a profile's "companions": expert counting, offsets, sorting, row
// expansion, activation quantization, per-expert pointer setup, the
// un-permute and the top-k weighting) at the MoE kind's kernel floor each,
// plus a graph node. This program measures kernels of those shapes, written
// here from their published descriptions (SGLang's cutlass_moe_fp4 chain:
// prepare_moe_input's counting, a one-thread offsets walk over every
// expert and the arg-sort; FlashInfer's per-expert TMA stride setup), at
// one token, top-8 of 384 experts, hidden 7168, 256 intermediate rows per
// rank (Kimi-K2.5 at TP 8).
//
// Each case captures N copies of its kernel (or of the whole chain) into a
// graph and times 30 replays between two CUDA events; the cost per copy is
// the slope between two N, so the graph's own launch cancels out. One JSON
// line per case on stdout.
//
// Build: nvcc -O3 -arch=sm_90a -o gpu-moe-helpers scripts/gpu-moe-helpers.cu
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

constexpr int kExperts = 384;
constexpr int kTopK = 8;
constexpr int kHidden = 7168;
constexpr int kInter = 256;  // per rank: 2048 / TP 8
constexpr int kTokens = 1;
constexpr int kRows = kTokens * kTopK;

// One block per expert counts the expert's rows among the token-expert
// pairs (512 threads striding the pairs), then writes the two GEMMs'
// problem sizes.
__global__ void count_rows(const int* ids, int* sizes1, int* sizes2, int* counts, int pairs) {
  int e = blockIdx.x, n = 0;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) n += ids[i] == e;
  atomicAdd(&counts[e], n);
  __syncthreads();
  if (threadIdx.x == 0) {
    int rows = counts[e];
    sizes1[3 * e] = rows, sizes1[3 * e + 1] = 2 * kInter, sizes1[3 * e + 2] = kHidden;
    sizes2[3 * e] = rows, sizes2[3 * e + 1] = kHidden, sizes2[3 * e + 2] = kInter;
  }
}

// One thread walks every expert: row offsets and 128-row-rounded scale
// offsets as running sums (sgl-kernel's compute_expert_blockscale_offsets,
// launched <<<1, 1>>>; vLLM's compute_expert_offsets is the same walk
// without the rounded sum).
__global__ void serial_offsets(const int* __restrict__ sizes1, int* offsets, int* scaleOffsets, int* counts, const int64_t experts) {
  int total = 0, rounded = 0;
  offsets[0] = 0, scaleOffsets[0] = 0;
  for (int e = 0; e < experts; ++e) {
    counts[e] = total;
    int n = sizes1[3 * e];
    total += n;
    rounded += (n + 127) / 128 * 128;
    offsets[e + 1] = total;
    scaleOffsets[e + 1] = rounded;
  }
}

// One block per expert places its pairs: input row per slot and slot per
// pair.
__global__ void arg_sort(const int* ids, int* inPerm, int* outPerm, int* counts, int pairs) {
  int e = blockIdx.x;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x)
    if (ids[i] == e) {
      // Modulo: run alone, without the offsets walk resetting the
      // counters between calls, the slots would run past the buffer.
      int s = atomicAdd(&counts[e], 1) % pairs;
      inPerm[s] = i / kTopK, outPerm[i] = s;
    }
}

// Copies rows in the order map gives (expansion into expert order, or the
// un-permute back).
__global__ void gather_rows(const __nv_bfloat16* in, __nv_bfloat16* out, const int* map, int cols) {
  const uint4* src = reinterpret_cast<const uint4*>(in + size_t(map[blockIdx.x]) * cols);
  uint4* dst = reinterpret_cast<uint4*>(out + size_t(blockIdx.x) * cols);
  for (int c = threadIdx.x; c < cols / 8; c += blockDim.x) dst[c] = src[c];
}

// Block-scaled 4-bit quantization of rows: per 16 values an absolute
// maximum, a scale byte and eight packed bytes.
__global__ void quant_rows(const __nv_bfloat16* in, uint8_t* out, uint8_t* scales, int cols) {
  int r = blockIdx.x;
  for (int b = threadIdx.x; b < cols / 16; b += blockDim.x) {
    const __nv_bfloat16* p = in + size_t(r) * cols + 16 * b;
    float v[16], m = 0;
    for (int j = 0; j < 16; ++j) v[j] = __bfloat162float(p[j]), m = fmaxf(m, fabsf(v[j]));
    float s = m / 6.f + 1e-12f;
    scales[size_t(r) * (cols / 16) + b] = uint8_t(fminf(255.f, s * 16.f));
    for (int j = 0; j < 16; j += 2) {
      int lo = min(15, int(fabsf(v[j]) / s)), hi = min(15, int(fabsf(v[j + 1]) / s));
      out[(size_t(r) * cols + 16 * b + j) / 2] = uint8_t(lo | (hi << 4));
    }
  }
}

// One thread per expert writes its GEMM operands' pointers and strides.
__global__ void pointer_setup(const int* offsets, const uint8_t* a, const uint8_t* w, __nv_bfloat16* c,
                              const uint8_t** aPtr, const uint8_t** wPtr, __nv_bfloat16** cPtr, int64_t* strides,
                              int experts) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= experts) return;
  int o = offsets[e];
  aPtr[e] = a + size_t(o) * kHidden / 2;
  wPtr[e] = w + size_t(e) * 2 * kInter * kHidden / 2;
  cPtr[e] = c + size_t(o) * 2 * kInter;
  strides[3 * e] = kHidden / 2, strides[3 * e + 1] = kHidden / 2, strides[3 * e + 2] = 2 * kInter;
}

// SiLU(gate) x up on the GEMM's rows.
__global__ void silu_mul(const __nv_bfloat16* in, __nv_bfloat16* out, int rows, int cols) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows * cols; i += gridDim.x * blockDim.x) {
    int r = i / cols, c = i % cols;
    float g = __bfloat162float(in[size_t(r) * 2 * cols + c]), u = __bfloat162float(in[size_t(r) * 2 * cols + cols + c]);
    out[i] = __float2bfloat16(g / (1.f + __expf(-g)) * u);
  }
}

__global__ void cast_weights(const float* w, __nv_bfloat16* o, int n) {
  int i = threadIdx.x;
  if (i < n) o[i] = __float2bfloat16(w[i]);
}

__global__ void scale_rows(__nv_bfloat16* x, const __nv_bfloat16* w, int rows, int cols) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows * cols; i += gridDim.x * blockDim.x)
    x[i] = __hmul(x[i], w[i / cols]);
}

__global__ void sum_topk(const __nv_bfloat16* x, __nv_bfloat16* o, int k, int cols) {
  for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
    float s = 0;
    for (int j = 0; j < k; ++j) s += __bfloat162float(x[size_t(j) * cols + c]);
    o[c] = __float2bfloat16(s);
  }
}

__global__ void one_value(float* x) {
  if (threadIdx.x == 0) x[0] += 1.f;
}

struct Bufs {
  int *ids, *sizes1, *sizes2, *counts, *offsets, *scaleOffsets, *inPerm, *outPerm;
  __nv_bfloat16 *x, *xe, *c1, *act, *c2, *y, *wbf;
  uint8_t *xq, *xs, *aq, *as, *w;
  const uint8_t **aPtr, **wPtr;
  __nv_bfloat16** cPtr;
  int64_t* strides;
  float *wts, *one;
};

template <class T>
T* alloc(size_t n) {
  T* p;
  CHECK(cudaMalloc(&p, n * sizeof(T)));
  CHECK(cudaMemset(p, 0, n * sizeof(T)));
  return p;
}

// The chain's steps, in the order the engines launch them (the GEMMs left
// out: they are the op tpscope prices by its roofline).
std::vector<std::pair<std::string, std::function<void(cudaStream_t)>>> steps(Bufs& b) {
  int pairs = kRows;
  return {
      {"zero_fill", [&b](cudaStream_t s) { CHECK(cudaMemsetAsync(b.counts, 0, kExperts * sizeof(int), s)); }},
      {"count_rows", [&b, pairs](cudaStream_t s) { count_rows<<<kExperts, 512, 0, s>>>(b.ids, b.sizes1, b.sizes2, b.counts, pairs); }},
      {"serial_offsets", [&b](cudaStream_t s) { serial_offsets<<<1, 1, 0, s>>>(b.sizes1, b.offsets, b.scaleOffsets, b.counts, kExperts); }},
      {"arg_sort", [&b, pairs](cudaStream_t s) { arg_sort<<<kExperts, 512, 0, s>>>(b.ids, b.inPerm, b.outPerm, b.counts, pairs); }},
      {"expand_rows", [&b](cudaStream_t s) { gather_rows<<<kRows, 256, 0, s>>>(b.x, b.xe, b.inPerm, kHidden); }},
      {"quant_input", [&b](cudaStream_t s) { quant_rows<<<kRows, 256, 0, s>>>(b.xe, b.xq, b.xs, kHidden); }},
      {"pointer_setup", [&b](cudaStream_t s) { pointer_setup<<<(kExperts + 127) / 128, 128, 0, s>>>(b.offsets, b.xq, b.w, b.c1, b.aPtr, b.wPtr, b.cPtr, b.strides, kExperts); }},
      {"silu_mul", [&b](cudaStream_t s) { silu_mul<<<8, 256, 0, s>>>(b.c1, b.act, kRows, kInter); }},
      {"quant_intermediate", [&b](cudaStream_t s) { quant_rows<<<kRows, 256, 0, s>>>(b.act, b.aq, b.as, kInter); }},
      {"pointer_setup_2", [&b](cudaStream_t s) { pointer_setup<<<(kExperts + 127) / 128, 128, 0, s>>>(b.offsets, b.aq, b.w, b.c1, b.aPtr, b.wPtr, b.cPtr, b.strides, kExperts); }},
      {"unpermute_rows", [&b](cudaStream_t s) { gather_rows<<<kRows, 256, 0, s>>>(b.c2, b.y, b.outPerm, kHidden); }},
      {"cast_weights", [&b](cudaStream_t s) { cast_weights<<<1, 32, 0, s>>>(b.wts, b.wbf, kRows); }},
      {"scale_rows", [&b](cudaStream_t s) { scale_rows<<<56, 256, 0, s>>>(b.y, b.wbf, kRows, kHidden); }},
      {"sum_topk", [&b](cudaStream_t s) { sum_topk<<<28, 256, 0, s>>>(b.y, b.c2, kTopK, kHidden); }},
  };
}

// msPerReplay captures n calls of f into one graph and returns the median
// replay time of 30 replays, in ms.
double msPerReplay(cudaStream_t s, int n, const std::function<void(cudaStream_t)>& f) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n; ++i) f(s);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(ge, s));
  CHECK(cudaStreamSynchronize(s));
  cudaEvent_t a, z;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&z));
  std::vector<float> t;
  for (int i = 0; i < 30; ++i) {
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaEventRecord(z, s));
    CHECK(cudaEventSynchronize(z));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, z));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(z));
  return t[t.size() / 2];
}

void report(cudaStream_t s, const std::string& name, int per, int n1, int n2, const std::function<void(cudaStream_t)>& f) {
  double t1 = msPerReplay(s, n1, f), t2 = msPerReplay(s, n2, f);
  double us = (t2 - t1) * 1e3 / double(n2 - n1) / per;
  printf("{\"case\": \"%s\", \"kernels_per_copy\": %d, \"us_per_kernel\": %.3f, \"n1\": %d, \"ms1\": %.4f, \"n2\": %d, \"ms2\": %.4f}\n",
         name.c_str(), per, us, n1, t1, n2, t2);
  fflush(stdout);
}

int main() {
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  printf("{\"device\": \"%s\", \"sms\": %d, \"cc\": \"%d.%d\"}\n", p.name, p.multiProcessorCount, p.major, p.minor);

  Bufs b{};
  b.ids = alloc<int>(kRows);
  std::vector<int> ids(kRows);
  for (int i = 0; i < kRows; ++i) ids[i] = (i * 47 + 5) % kExperts;  // 8 distinct experts
  CHECK(cudaMemcpy(b.ids, ids.data(), kRows * sizeof(int), cudaMemcpyHostToDevice));
  b.sizes1 = alloc<int>(3 * kExperts), b.sizes2 = alloc<int>(3 * kExperts), b.counts = alloc<int>(kExperts);
  b.offsets = alloc<int>(kExperts + 1), b.scaleOffsets = alloc<int>(kExperts + 1);
  b.inPerm = alloc<int>(kRows), b.outPerm = alloc<int>(kRows);
  b.x = alloc<__nv_bfloat16>(size_t(kTokens) * kHidden), b.xe = alloc<__nv_bfloat16>(size_t(kRows) * kHidden);
  b.c1 = alloc<__nv_bfloat16>(size_t(kRows) * 2 * kInter), b.act = alloc<__nv_bfloat16>(size_t(kRows) * kInter);
  b.c2 = alloc<__nv_bfloat16>(size_t(kRows) * kHidden), b.y = alloc<__nv_bfloat16>(size_t(kRows) * kHidden);
  b.wbf = alloc<__nv_bfloat16>(kRows);
  b.xq = alloc<uint8_t>(size_t(kRows) * kHidden / 2), b.xs = alloc<uint8_t>(size_t(kRows) * kHidden / 16);
  b.aq = alloc<uint8_t>(size_t(kRows) * kInter / 2), b.as = alloc<uint8_t>(size_t(kRows) * kInter / 16);
  b.w = alloc<uint8_t>(16);  // the pointer setup only offsets it
  b.aPtr = alloc<const uint8_t*>(kExperts), b.wPtr = alloc<const uint8_t*>(kExperts);
  b.cPtr = alloc<__nv_bfloat16*>(kExperts), b.strides = alloc<int64_t>(3 * kExperts);
  b.wts = alloc<float>(kRows), b.one = alloc<float>(1);

  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int n1 = 200, n2 = 800;
  report(s, "one_value", 1, n1, n2, [&b](cudaStream_t st) { one_value<<<1, 32, 0, st>>>(b.one); });
  auto chain = steps(b);
  for (auto& st : chain) report(s, st.first, 1, n1, n2, st.second);
  // The one-thread walk's cost grows with the expert count: DeepSeek-V3
  // and GLM-5 have 256 experts, Kimi-K2.5 384; 64 and 128 for the slope.
  for (int experts : {64, 128, 256, 384})
    report(s, "serial_offsets_e" + std::to_string(experts), 1, n1, n2, [&b, experts](cudaStream_t st) {
      serial_offsets<<<1, 1, 0, st>>>(b.sizes1, b.offsets, b.scaleOffsets, b.counts, experts);
    });
  report(s, "chain", int(chain.size()), 50, 200, [&chain](cudaStream_t st) {
    for (auto& c : chain) c.second(st);
  });
  CHECK(cudaDeviceSynchronize());
  return 0;
}

// Softmax family: out[row, :] = epi(softmax(src[row, :])) (or log-softmax) over rows of D
// elements. STRATEGY: 0 a warp per row (short rows), 1 a block per row, 2 a cluster of CLUSTER
// blocks per row (sm_90), each holding D / CLUSTER of it in shared memory. ALGO (the reduction
// agent): 0 three passes (max, sum of exp, write), 1 online (max and sum in one pass, then
// write), 2 the row cached in shared memory (one global read; needs the rows of a block, or the
// cluster's part of a row, to fit).
// Slots: BLOCK (config), VEC (memory), FAST (compute), STRATEGY, ALGO, CLUSTER (reduction).
// Constraints: D % VEC == 0 when VEC > 1; ALGO 2 only when the rows fit in shared memory;
// STRATEGY 2 exactly when CLUSTER > 1, and only with ALGO 2.
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "reduce_acc.cuh"
#if STRATEGY == 2
#include "tk_cluster.cuh"
#endif

static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");

namespace {

{{CONSTANTS}}
static_assert(VEC == 1 || kD % VEC == 0, "VEC must divide the row length");
constexpr int kThreads = STRATEGY == 0 ? 32 : BLOCK;
constexpr int kRowsPerBlock = STRATEGY == 0 ? BLOCK / 32 : 1;
static_assert((STRATEGY == 2) == (CLUSTER > 1) && (STRATEGY != 2 || ALGO == 2), "a cluster per row caches it");
// A cluster's block holds kChunk elements of its row (a multiple of VEC, so vectors stay aligned).
constexpr int64_t kChunk = ((kD + CLUSTER - 1) / CLUSTER + VEC - 1) / VEC * VEC;

{{SRC}}

{{EPI}}

template <int OP> __device__ __forceinline__ tk::Acc row_total(tk::Acc s) {
  if constexpr (STRATEGY == 0) return tk::warp_reduce<OP>(s);
  else return tk::block_reduce<OP, BLOCK>(s);
}

__device__ __forceinline__ void load(const tk::Ptrs& P, const float* cache, int64_t base, int64_t c, float* x) {
  if (ALGO == 2) {
#pragma unroll
    for (int l = 0; l < VEC; ++l) x[l] = cache[c + l];
  } else {
    float t[1][VEC];
    src<VEC>(P, base + c, nullptr, t);
#pragma unroll
    for (int l = 0; l < VEC; ++l) x[l] = t[0][l];
  }
}

__global__ void __launch_bounds__(BLOCK) softmax_kernel(tk::Ptrs P, float* out) {
  extern __shared__ float cache_all[];
  const int t = STRATEGY == 0 ? (threadIdx.x & 31) : threadIdx.x;
  const int local = STRATEGY == 0 ? (threadIdx.x >> 5) : 0;
  float* cache = cache_all + (int64_t)local * kD;
  for (int64_t row0 = (int64_t)blockIdx.x * kRowsPerBlock; row0 < kRows; row0 += (int64_t)gridDim.x * kRowsPerBlock) {
    const int64_t row = row0 + local;
    const bool live = row < kRows;  // a warp past the last row still joins the block's barriers
    const int64_t base = (live ? row : 0) * kD;
    float m, s;
    if (ALGO == 1) {
      tk::Acc a = tk::acc_init<7>();
      for (int64_t c = (int64_t)t * VEC; live && c < kD; c += (int64_t)kThreads * VEC) {
        float x[VEC];
        load(P, cache, base, c, x);
#pragma unroll
        for (int l = 0; l < VEC; ++l) tk::acc_add<7>(a, x[l], 0);
      }
      a = row_total<7>(a);
      m = a.a, s = a.b;
    } else {
      tk::Acc a = tk::acc_init<2>();
      for (int64_t c = (int64_t)t * VEC; live && c < kD; c += (int64_t)kThreads * VEC) {
        float x[1][VEC];
        src<VEC>(P, base + c, nullptr, x);
#pragma unroll
        for (int l = 0; l < VEC; ++l) {
          a.a = fmaxf(a.a, x[0][l]);
          if (ALGO == 2) cache[c + l] = x[0][l];
        }
      }
      m = row_total<2>(a).a;
      tk::Acc b = tk::acc_init<0>();
      for (int64_t c = (int64_t)t * VEC; live && c < kD; c += (int64_t)kThreads * VEC) {
        float x[VEC];
        load(P, cache, base, c, x);
#pragma unroll
        for (int l = 0; l < VEC; ++l) b.a += T_EXP(x[l] - m);
      }
      s = row_total<0>(b).a;
    }
    const float inv = 1.0f / s, log_s = T_LOG(s);
    for (int64_t c = (int64_t)t * VEC; live && c < kD; c += (int64_t)kThreads * VEC) {
      float x[VEC];
      load(P, cache, base, c, x);
#pragma unroll
      for (int l = 0; l < VEC; ++l) x[l] = kLog ? x[l] - m - log_s : T_EXP(x[l] - m) * inv;
      float res[1][VEC];
      epi<VEC>(P, base + c, x, res);
      tk::store_vec<VEC>(out + base + c, res[0]);
    }
    if (STRATEGY == 1 && ALGO == 2) __syncthreads();  // the next row overwrites the cache
  }
}

#if STRATEGY == 2
constexpr int64_t kStep = (int64_t)BLOCK * VEC;
constexpr int64_t kIters = (kChunk + kStep - 1) / kStep;

__global__ void __launch_bounds__(BLOCK) softmax_cluster(tk::Ptrs P, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();
#else
  extern __shared__ __align__(16) float part[];
  __shared__ float exchange[2];
  const int64_t row = blockIdx.x / CLUSTER;
  const int64_t begin = (int64_t)cooperative_groups::this_cluster().block_rank() * kChunk;
  const int64_t len = kD - begin < kChunk ? (kD - begin > 0 ? kD - begin : 0) : kChunk;
  const int64_t base = row * kD + begin;
  float m = -INFINITY;
  tk::stage_part<BLOCK, VEC, kIters>(
      part, len, [&](int64_t c, float (*x)[VEC]) { src<VEC>(P, base + c, nullptr, x); },
      [&](const float* x) {
#pragma unroll
        for (int l = 0; l < VEC; ++l) m = fmaxf(m, x[l]);
      });
  const float row_max = tk::cluster_total<2, CLUSTER>(row_total<2>({m, 0.f, 0}).a, &exchange[0]);
  float s = 0.f;
  for (int64_t c = (int64_t)threadIdx.x * VEC; c < len; c += kStep) {
    float x[VEC];
    tk::shared_load<VEC>(x, part + c);
#pragma unroll
    for (int l = 0; l < VEC; ++l) s += T_EXP(x[l] - row_max);
  }
  const float row_sum = tk::cluster_total<0, CLUSTER>(row_total<0>({s, 0.f, 0}).a, &exchange[1]);
  tk::cluster_arrive();
  const float inv = 1.0f / row_sum, log_s = T_LOG(row_sum);
  for (int64_t c = (int64_t)threadIdx.x * VEC; c < len; c += kStep) {
    float x[VEC];
    tk::shared_load<VEC>(x, part + c);
#pragma unroll
    for (int l = 0; l < VEC; ++l) x[l] = kLog ? x[l] - row_max - log_s : T_EXP(x[l] - row_max) * inv;
    float res[1][VEC];
    epi<VEC>(P, base + c, x, res);
    tk::store_vec<VEC>(out + base + c, res[0]);
  }
  tk::cluster_wait();
#endif
}
#endif

}  // namespace

extern "C" size_t {{NS}}_scratch_bytes() { return 0; }

extern "C" cudaError_t {{NS}}_launch(const float* const* ins, void* const* outs, void* scratch,
                                     cudaStream_t stream) {
  (void)scratch;
  tk::Ptrs P{};
{{BIND_INPUTS}}
  float* out = static_cast<float*>(outs[0]);
#if STRATEGY == 2
  return tk::launch_clustered(softmax_cluster, (unsigned)(kRows * CLUSTER), BLOCK, (size_t)kChunk * sizeof(float),
                              CLUSTER, stream, P, out);
#endif
  const size_t smem = ALGO == 2 ? (size_t)kRowsPerBlock * kD * sizeof(float) : 0;
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(softmax_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err != cudaSuccess) return err;
  }
  int64_t blocks = (kRows + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t cap = (int64_t)kSmCount * 64;
  if (blocks > cap) blocks = cap;
  softmax_kernel<<<(unsigned)blocks, BLOCK, smem, stream>>>(P, out);
  return cudaGetLastError();
}

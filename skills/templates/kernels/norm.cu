// Normalization family (LayerNorm, GroupNorm, InstanceNorm, BatchNorm with batch statistics):
// the input is [OUTER, GROUPS, INNER]; group g holds the OUTER x INNER elements
// (o * GROUPS + g) * INNER + j, normalized by their mean and variance, then scaled and shifted
// (affine: per element j, per channel of the group, or per group) and passed through epi.
// ALGO (the reduction agent): 0 two passes for the statistics (mean, then squared deviations),
// 1 one pass of sum and sum of squares, 2 one pass of Welford, 3 the group cached in shared
// memory (one global read), 4 the group split over a cluster of CLUSTER blocks (sm_90), each
// caching its part (one global read of a group too large for one block). SPLIT > 1 (ALGO 1 or 2)
// spreads a group over SPLIT blocks: a first kernel writes partial statistics, the second merges
// them and normalizes. Slots: BLOCK (config), VEC (memory), FAST (compute: rsqrtf and __expf),
// ALGO, SPLIT, CLUSTER (reduction).
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "reduce_acc.cuh"
#if ALGO == 4
#include "tk_cluster.cuh"
#endif

static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");
static_assert(SPLIT == 1 || ALGO == 1 || ALGO == 2, "SPLIT > 1 needs one-pass statistics (ALGO 1 or 2)");
static_assert((ALGO == 4) == (CLUSTER > 1) && (ALGO != 4 || SPLIT == 1), "ALGO 4 is the cluster's");

namespace {

{{CONSTANTS}}
constexpr int64_t kCount = kOuter * kInner;  // elements per group
static_assert(VEC == 1 || kInner % VEC == 0, "VEC must divide INNER");
constexpr int64_t kChunk = ((kCount + SPLIT - 1) / SPLIT + VEC - 1) / VEC * VEC;
constexpr int64_t kPart = ((kCount + CLUSTER - 1) / CLUSTER + VEC - 1) / VEC * VEC;  // a cluster block's

{{SRC}}

{{EPI}}

__device__ __forceinline__ int64_t element(int64_t g, int64_t k) {
  if constexpr (kOuter == 1) return g * kInner + k;
  return ((k / kInner) * kGroups + g) * kInner + k % kInner;
}

__device__ __forceinline__ int64_t affine_index(int64_t g, int64_t k) {
{{AFFINE}}
}

__device__ __forceinline__ tk::Stats block_stats(tk::Stats s) {
  __shared__ tk::Stats warps[BLOCK / 32];
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) s = tk::stats_merge(s, tk::stats_shfl_xor(s, m));
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warps[w] = s;
  __syncthreads();
  s = lane < BLOCK / 32 ? warps[lane] : tk::Stats{0.f, 0.f, 0.f};
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) s = tk::stats_merge(s, tk::stats_shfl_xor(s, m));
  return s;
}

__device__ __forceinline__ void load(const tk::Ptrs& P, const float* cache, int64_t g, int64_t k, float* x) {
  if (ALGO == 3) {
#pragma unroll
    for (int l = 0; l < VEC; ++l) x[l] = cache[k + l];
  } else {
    float t[1][VEC];
    src<VEC>(P, element(g, k), nullptr, t);
#pragma unroll
    for (int l = 0; l < VEC; ++l) x[l] = t[0][l];
  }
}

// Statistics of elements [begin, end) of group g (the whole group unless split).
__device__ __forceinline__ tk::Stats group_stats(const tk::Ptrs& P, float* cache, int64_t g, int64_t begin,
                                                 int64_t end) {
  float sum = 0.f, sumsq = 0.f;
  tk::Stats w{0.f, 0.f, 0.f};
  for (int64_t k = begin + (int64_t)threadIdx.x * VEC; k < end; k += (int64_t)BLOCK * VEC) {
    float x[1][VEC];
    src<VEC>(P, element(g, k), nullptr, x);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const float v = x[0][l];
      if (ALGO == 3) cache[k + l] = v;
      if (ALGO == 2) {
        w.n += 1.f;
        const float d = v - w.mean;
        w.mean += d / w.n;
        w.m2 += d * (v - w.mean);
      } else {
        sum += v, sumsq += v * v;
      }
    }
  }
  if (ALGO != 2) {
    const int64_t lo = begin + (int64_t)threadIdx.x * VEC;
    const float n = lo < end ? (float)(((end - lo) + (int64_t)BLOCK * VEC - 1) / ((int64_t)BLOCK * VEC) * VEC) : 0.f;
    w = {n, n > 0.f ? sum / n : 0.f, n > 0.f ? sumsq - sum * sum / n : 0.f};
  }
  if (ALGO == 0 || ALGO == 3) {
    // Two-pass: the mean first, then the squared deviations from it.
    const float mean = block_stats(w).mean;
    float dev = 0.f;
    for (int64_t k = begin + (int64_t)threadIdx.x * VEC; k < end; k += (int64_t)BLOCK * VEC) {
      float x[VEC];
      load(P, cache, g, k, x);
#pragma unroll
      for (int l = 0; l < VEC; ++l) dev += (x[l] - mean) * (x[l] - mean);
    }
    w = {w.n, mean, dev};
    const tk::Stats total = block_stats(w);
    return {total.n, mean, total.m2};
  }
  return block_stats(w);
}

__device__ __forceinline__ void normalize(const tk::Ptrs& P, const float* cache, float* out, int64_t g,
                                          int64_t begin, int64_t end, float mean, float rstd) {
  for (int64_t k = begin + (int64_t)threadIdx.x * VEC; k < end; k += (int64_t)BLOCK * VEC) {
    float x[VEC];
    load(P, cache, g, k, x);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const int64_t a = affine_index(g, k + l);
      (void)a;
      x[l] = (x[l] - mean) * rstd;
      if constexpr (kWeight >= 0) x[l] *= __ldg(P.p[kWeight < 0 ? 0 : kWeight] + a);
      if constexpr (kBias >= 0) x[l] += __ldg(P.p[kBias < 0 ? 0 : kBias] + a);
    }
    const int64_t i = element(g, k);
    float res[1][VEC];
    epi<VEC>(P, i, x, res);
    tk::store_vec<VEC>(out + i, res[0]);
  }
}

__device__ __forceinline__ float inv_std(tk::Stats s) {
  const float var = s.m2 / s.n;
  return T_RSQRT((var > 0.f ? var : 0.f) + kEps);
}

__global__ void __launch_bounds__(BLOCK) norm_fused(tk::Ptrs P, float* out) {
  extern __shared__ float cache[];
  for (int64_t g = blockIdx.x; g < kGroups; g += gridDim.x) {
    const tk::Stats s = group_stats(P, cache, g, 0, kCount);
    normalize(P, cache, out, g, 0, kCount, s.mean, inv_std(s));
    if (ALGO == 3) __syncthreads();  // the next group overwrites the cache
  }
}

__global__ void __launch_bounds__(BLOCK) norm_partial(tk::Ptrs P, tk::Stats* partial) {
  const int64_t g = blockIdx.x / SPLIT, begin = (blockIdx.x % SPLIT) * kChunk;
  const int64_t end = begin + kChunk < kCount ? begin + kChunk : kCount;
  const tk::Stats s = group_stats(P, nullptr, g, begin, end);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void __launch_bounds__(BLOCK) norm_apply(tk::Ptrs P, const tk::Stats* partial, float* out) {
  const int64_t g = blockIdx.x / SPLIT, begin = (blockIdx.x % SPLIT) * kChunk;
  const int64_t end = begin + kChunk < kCount ? begin + kChunk : kCount;
  tk::Stats s{0.f, 0.f, 0.f};
  for (int p = 0; p < SPLIT; ++p) s = tk::stats_merge(s, partial[g * SPLIT + p]);
  normalize(P, nullptr, out, g, begin, end, s.mean, inv_std(s));
}

#if ALGO == 4
constexpr int64_t kStep = (int64_t)BLOCK * VEC;
constexpr int64_t kIters = (kPart + kStep - 1) / kStep;

// Two-pass statistics over the whole group from the parts on chip: the mean, then the squared
// deviations from it, each summed over the cluster.
__global__ void __launch_bounds__(BLOCK) norm_cluster(tk::Ptrs P, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();
#else
  extern __shared__ __align__(16) float part[];
  __shared__ float exchange[2];
  const int64_t g = blockIdx.x / CLUSTER;
  const int64_t begin = (int64_t)cooperative_groups::this_cluster().block_rank() * kPart;
  const int64_t len = kCount - begin < kPart ? (kCount - begin > 0 ? kCount - begin : 0) : kPart;
  float sum = 0.f;
  tk::stage_part<BLOCK, VEC, kIters>(
      part, len, [&](int64_t k, float (*x)[VEC]) { src<VEC>(P, element(g, begin + k), nullptr, x); },
      [&](const float* x) {
#pragma unroll
        for (int l = 0; l < VEC; ++l) sum += x[l];
      });
  sum = tk::block_reduce<0, BLOCK>({sum, 0.f, 0}).a;
  const float mean = tk::cluster_total<0, CLUSTER>(sum, &exchange[0]) / (float)kCount;
  float dev = 0.f;
  for (int64_t k = (int64_t)threadIdx.x * VEC; k < len; k += kStep) {
    float x[VEC];
    tk::shared_load<VEC>(x, part + k);
#pragma unroll
    for (int l = 0; l < VEC; ++l) dev += (x[l] - mean) * (x[l] - mean);
  }
  dev = tk::block_reduce<0, BLOCK>({dev, 0.f, 0}).a;
  const float m2 = tk::cluster_total<0, CLUSTER>(dev, &exchange[1]);
  tk::cluster_arrive();
  const float rstd = inv_std({(float)kCount, mean, m2});
  for (int64_t k = (int64_t)threadIdx.x * VEC; k < len; k += kStep) {
    float x[VEC];
    tk::shared_load<VEC>(x, part + k);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const int64_t a = affine_index(g, begin + k + l);
      (void)a;
      x[l] = (x[l] - mean) * rstd;
      if constexpr (kWeight >= 0) x[l] *= __ldg(P.p[kWeight < 0 ? 0 : kWeight] + a);
      if constexpr (kBias >= 0) x[l] += __ldg(P.p[kBias < 0 ? 0 : kBias] + a);
    }
    const int64_t i = element(g, begin + k);
    float res[1][VEC];
    epi<VEC>(P, i, x, res);
    tk::store_vec<VEC>(out + i, res[0]);
  }
  tk::cluster_wait();
#endif
}
#endif

}  // namespace

extern "C" size_t {{NS}}_scratch_bytes() { return SPLIT > 1 ? (size_t)kGroups * SPLIT * sizeof(tk::Stats) : 0; }

extern "C" cudaError_t {{NS}}_launch(const float* const* ins, void* const* outs, void* scratch,
                                     cudaStream_t stream) {
  tk::Ptrs P{};
{{BIND_INPUTS}}
  float* out = static_cast<float*>(outs[0]);
#if ALGO == 4
  (void)scratch;
  return tk::launch_clustered(norm_cluster, (unsigned)(kGroups * CLUSTER), BLOCK, (size_t)kPart * sizeof(float),
                              CLUSTER, stream, P, out);
#endif
  if (SPLIT == 1) {
    const size_t smem = ALGO == 3 ? (size_t)kCount * sizeof(float) : 0;
    if (smem > 48 * 1024) {
      cudaError_t err = cudaFuncSetAttribute(norm_fused, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
      if (err != cudaSuccess) return err;
    }
    const int64_t blocks = kGroups < (int64_t)kSmCount * 32 ? kGroups : (int64_t)kSmCount * 32;
    norm_fused<<<(unsigned)blocks, BLOCK, smem, stream>>>(P, out);
  } else {
    tk::Stats* partial = static_cast<tk::Stats*>(scratch);
    norm_partial<<<(unsigned)(kGroups * SPLIT), BLOCK, 0, stream>>>(P, partial);
    norm_apply<<<(unsigned)(kGroups * SPLIT), BLOCK, 0, stream>>>(P, partial, out);
  }
  return cudaGetLastError();
}

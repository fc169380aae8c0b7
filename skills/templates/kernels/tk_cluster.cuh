// Thread-block clusters (sm_90): a row or a group too long for one block's shared memory is split
// over the CLUSTER blocks of a cluster, each holding its part on chip, so the data is read from
// memory once. The blocks exchange one float each through distributed shared memory.
#pragma once
#include <cooperative_groups.h>

#include "tk_common.cuh"

namespace tk {

// Shared-memory vector access (tk::load_vec reads through the read-only global path).
template <int V> __device__ __forceinline__ void shared_load(float* d, const float* s) {
  if constexpr (V == 4) {
    const float4 t = *reinterpret_cast<const float4*>(s);
    d[0] = t.x, d[1] = t.y, d[2] = t.z, d[3] = t.w;
  } else if constexpr (V == 2) {
    const float2 t = *reinterpret_cast<const float2*>(s);
    d[0] = t.x, d[1] = t.y;
  } else {
    d[0] = s[0];
  }
}

// Stages a block's part of a row or group (len elements, ITERS steps of THREADS x V) in `part`,
// 4 vector loads in flight per thread before any is stored: load(k, x) reads the V values at the
// part's element k into x, fold(x) sees them as they are stored.
template <int THREADS, int V, int64_t ITERS, typename Load, typename Fold>
__device__ __forceinline__ void stage_part(float* part, int64_t len, Load load, Fold fold) {
  constexpr int kBatch = 4;
  constexpr int64_t kStep = (int64_t)THREADS * V;
  for (int64_t i0 = 0; i0 < ITERS; i0 += kBatch) {
    float x[kBatch][1][V];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t k = (i0 + u) * kStep + (int64_t)threadIdx.x * V;
      if (i0 + u < ITERS && k < len) load(k, x[u]);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t k = (i0 + u) * kStep + (int64_t)threadIdx.x * V;
      if (i0 + u < ITERS && k < len) {
        store_vec<V>(part + k, x[u][0]);
        fold(x[u][0]);
      }
    }
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The cluster's max (OP 2) or sum (OP 0) of every block's `mine`, the same in every block (taken
// in rank order). `slot` is a __shared__ float of the block, one per exchange: a block may still
// read a slot of this exchange while its owner writes the next one's.
template <int OP, int BLOCKS> __device__ __forceinline__ float cluster_total(float mine, float* slot) {
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  if (threadIdx.x == 0) *slot = mine;
  cluster.sync();
  float total = OP == 2 ? -INFINITY : 0.f;
#pragma unroll
  for (int r = 0; r < BLOCKS; ++r) {
    const float v = *cluster.map_shared_rank(slot, r);
    total = OP == 2 ? fmaxf(total, v) : total + v;
  }
  return total;
}

// After a block's last read of another block's shared memory: arrive now, wait before exiting, so
// no block leaves (and frees its shared memory) while another still reads it.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
#endif

// Launch `kernel` over `blocks` blocks in clusters of `cluster` (a multiple of it): sizes past 8 are
// not portable and must be allowed per kernel; the dynamic shared memory past 48 KiB likewise.
template <typename... Params, typename... Args>
cudaError_t launch_clustered(void (*kernel)(Params...), unsigned blocks, unsigned threads, size_t smem,
                             unsigned cluster, cudaStream_t stream, Args... args) {
  cudaError_t err = cudaSuccess;
  if (cluster > 8) err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (err == cudaSuccess && smem > 48 * 1024)
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return err;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = cluster;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

}  // namespace tk

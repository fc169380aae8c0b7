// Thread-block clusters (sm_90): a row or a group too long for one block's shared memory is split
// over the CLUSTER blocks of a cluster, each holding its part on chip, so the data is read from
// memory once. The clusters are persistent (as many as fit at once, each walking rows); a block
// exchanges its partial statistics with the others through distributed shared memory, and while it
// writes a row out it already copies its part of the next row in (cp.async into the slots it has
// just read: every thread reads back only what it staged, so the part needs no barrier).
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

// V floats from global to shared memory, asynchronously (sm_80+); 16 bytes bypass L1.
template <int V> __device__ __forceinline__ void cp_async(float* shared, const float* global) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(shared);
  if constexpr (V == 4) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(global), "n"(V * 4) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Launch `kernel` as persistent clusters of `cluster` blocks: as many clusters as fit on the GPU at
// once (at most `units`, the rows or groups they walk). Sizes past 8 are not portable and must be
// allowed per kernel; dynamic shared memory past 48 KiB likewise.
template <typename... Params, typename... Args>
cudaError_t launch_clustered(void (*kernel)(Params...), int64_t units, unsigned threads, size_t smem,
                             unsigned cluster, cudaStream_t stream, Args... args) {
  cudaError_t err = cudaSuccess;
  if (cluster > 8) err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (err == cudaSuccess && smem > 48 * 1024)
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return err;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = cluster;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(cluster);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  int active = 0;
  err = cudaOccupancyMaxActiveClusters(&active, kernel, &config);
  if (err != cudaSuccess) return err;
  if (active < 1) return cudaErrorInvalidClusterSize;  // no cluster of this size fits
  const int64_t clusters = units < active ? units : active;
  config.gridDim = dim3((unsigned)(clusters * cluster));
  return cudaLaunchKernelEx(&config, kernel, args...);
}

}  // namespace tk

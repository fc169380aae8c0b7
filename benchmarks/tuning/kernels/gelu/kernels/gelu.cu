// Exact (erf) GELU, tunable: BLOCK threads, VEC floats per load, UNROLL loads in flight per
// thread, WAVES grid-stride blocks per SM slot (0: one tile per block, no grid stride).
#include <cuda_runtime.h>

#include <cstdint>

#include "dispatch.cuh"

template <int VEC> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

__device__ __forceinline__ float gelu1(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float gelu_v(float v) { return gelu1(v); }
__device__ __forceinline__ float2 gelu_v(float2 v) { return make_float2(gelu1(v.x), gelu1(v.y)); }
__device__ __forceinline__ float4 gelu_v(float4 v) {
  return make_float4(gelu1(v.x), gelu1(v.y), gelu1(v.z), gelu1(v.w));
}

template <int VEC, int UNROLL>
__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t nvec) {
  using T = typename Vec<VEC>::T;
  const T* xv = reinterpret_cast<const T*>(x);
  T* yv = reinterpret_cast<T*>(y);
  const int64_t tile = (int64_t)blockDim.x * UNROLL;
  for (int64_t base = (int64_t)blockIdx.x * tile; base < nvec; base += (int64_t)gridDim.x * tile) {
    T v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      int64_t i = base + (int64_t)u * blockDim.x + threadIdx.x;
      if (i < nvec) v[u] = xv[i];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      int64_t i = base + (int64_t)u * blockDim.x + threadIdx.x;
      if (i < nvec) yv[i] = gelu_v(v[u]);
    }
  }
}

extern "C" cudaError_t gelu_launch(const float* x, float* y, int64_t n, int block, int vec, int unroll,
                                   int waves, int sm_count, cudaStream_t stream) {
  if (n % vec != 0) return cudaErrorInvalidValue;
  const int64_t nvec = n / vec;
  cudaError_t err = cudaErrorInvalidConfiguration;
  bool found = dispatch_int<1, 2, 4>(vec, [&](auto V) {
    dispatch_int<1, 2, 4, 8>(unroll, [&](auto U) {
      constexpr int kVec = decltype(V)::value;
      constexpr int kUnroll = decltype(U)::value;
      const int64_t tiles = (nvec + (int64_t)block * kUnroll - 1) / ((int64_t)block * kUnroll);
      int64_t grid = waves == 0 ? tiles : (int64_t)waves * sm_count * (2048 / block);
      if (grid > tiles) grid = tiles;
      if (grid < 1) grid = 1;
      gelu_kernel<kVec, kUnroll><<<(unsigned)grid, block, 0, stream>>>(x, y, nvec);
      err = cudaGetLastError();
    });
  });
  return found ? err : cudaErrorInvalidValue;
}

// Row reductions shared by the row-wise kernels: TPR threads (a multiple of 32) per row,
// RPB rows per block; every thread of the block must call row_reduce (it synchronizes).
#pragma once
#include <cuda_runtime.h>

#include <cmath>

template <int VEC> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

__device__ __forceinline__ void unpack(float v, float* o) { o[0] = v; }
__device__ __forceinline__ void unpack(float2 v, float* o) { o[0] = v.x, o[1] = v.y; }
__device__ __forceinline__ void unpack(float4 v, float* o) { o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w; }
__device__ __forceinline__ void pack(const float* i, float& v) { v = i[0]; }
__device__ __forceinline__ void pack(const float* i, float2& v) { v = make_float2(i[0], i[1]); }
__device__ __forceinline__ void pack(const float* i, float4& v) { v = make_float4(i[0], i[1], i[2], i[3]); }

template <bool MAX>
__device__ __forceinline__ float warp_reduce(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, w) : v + w;
  }
  return v;
}

template <bool MAX>
__device__ __forceinline__ float row_reduce(float v, float* scratch, int tpr) {
  v = warp_reduce<MAX>(v);
  if (tpr == 32) return v;
  const int row = threadIdx.x / tpr, w = (threadIdx.x % tpr) >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) scratch[row * 32 + w] = v;
  __syncthreads();
  v = lane < (tpr >> 5) ? scratch[row * 32 + lane] : (MAX ? -INFINITY : 0.f);
  return warp_reduce<MAX>(v);
}

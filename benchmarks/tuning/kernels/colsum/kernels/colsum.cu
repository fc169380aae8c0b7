// sum(x, dim=1, keepdim=True) for x [B, R, C], tunable: BX threads across columns, each owning
// VEC adjacent columns; BY threads down the rows, each summing UNROLL rows per step; the BY
// partial sums of a column are added in shared memory.
#include <cuda_runtime.h>

#include <cstdint>

#include "dispatch.cuh"

template <int VEC, int UNROLL>
__global__ void colsum_kernel(const float* __restrict__ x, float* __restrict__ y, int R, int C) {
  extern __shared__ float partial[];  // [BY][BX * VEC]
  const int bx = blockDim.x, by = blockDim.y;
  const int col0 = (blockIdx.x * bx + threadIdx.x) * VEC;
  const float* base = x + (int64_t)blockIdx.y * R * C;
  float acc[VEC];
#pragma unroll
  for (int v = 0; v < VEC; ++v) acc[v] = 0.f;
  if (col0 < C) {
    for (int r0 = threadIdx.y * UNROLL; r0 < R; r0 += by * UNROLL) {
      float vals[UNROLL][VEC];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int r = r0 + u;
        if (r < R) {
          const float* row = base + (int64_t)r * C + col0;
          if constexpr (VEC == 4) {
            float4 q = *reinterpret_cast<const float4*>(row);
            vals[u][0] = q.x, vals[u][1] = q.y, vals[u][2] = q.z, vals[u][3] = q.w;
          } else if constexpr (VEC == 2) {
            float2 q = *reinterpret_cast<const float2*>(row);
            vals[u][0] = q.x, vals[u][1] = q.y;
          } else {
            vals[u][0] = row[0];
          }
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v) vals[u][v] = 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int v = 0; v < VEC; ++v) acc[v] += vals[u][v];
    }
  }
#pragma unroll
  for (int v = 0; v < VEC; ++v) partial[(threadIdx.y * bx + threadIdx.x) * VEC + v] = acc[v];
  __syncthreads();
  for (int stride = 1; stride < by; stride <<= 1) {  // pairwise tree over the BY partials
    if (threadIdx.y % (2 * stride) == 0 && threadIdx.y + stride < by) {
#pragma unroll
      for (int v = 0; v < VEC; ++v)
        partial[(threadIdx.y * bx + threadIdx.x) * VEC + v] += partial[((threadIdx.y + stride) * bx + threadIdx.x) * VEC + v];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && col0 < C) {
#pragma unroll
    for (int v = 0; v < VEC; ++v) y[(int64_t)blockIdx.y * C + col0 + v] = partial[threadIdx.x * VEC + v];
  }
}

extern "C" cudaError_t colsum_launch(const float* x, float* y, int B, int R, int C, int bx, int by, int vec,
                                     int unroll, cudaStream_t stream) {
  if (C % vec != 0 || bx * by > 1024) return cudaErrorInvalidValue;
  cudaError_t err = cudaErrorInvalidConfiguration;
  bool found = dispatch_int<1, 2, 4>(vec, [&](auto V) {
    dispatch_int<1, 2, 4, 8>(unroll, [&](auto U) {
      constexpr int kVec = decltype(V)::value;
      constexpr int kUnroll = decltype(U)::value;
      dim3 block(bx, by);
      dim3 grid((C / kVec + bx - 1) / bx, B);
      size_t smem = (size_t)bx * by * kVec * sizeof(float);
      colsum_kernel<kVec, kUnroll><<<grid, block, smem, stream>>>(x, y, R, C);
      err = cudaGetLastError();
    });
  });
  return found ? err : cudaErrorInvalidValue;
}

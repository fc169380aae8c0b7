// LayerNorm over the last dimension with affine weight and bias, one block per row.
// Fast path (row length a multiple of 4, 16-byte aligned pointers, at most 8192 columns): the row
// is read once into registers as float4s, mean and variance are computed from the registers
// (two-pass, so no cancellation), then normalized, scaled and written. Generic path otherwise:
// scalar, three passes over global memory.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kThreads = 128;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block; every thread gets the same value. `sh` holds one float per warp.
__device__ __forceinline__ float block_sum(float v, float* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < nwarps; ++i) total += sh[i];
  __syncthreads();  // sh is reused by the next reduction
  return total;
}

template <int VPT>
__global__ void __launch_bounds__(kThreads) layernorm_vec4_kernel(const float* __restrict__ x,
                                                                  const float* __restrict__ w,
                                                                  const float* __restrict__ b,
                                                                  float* __restrict__ y, int cols,
                                                                  float eps) {
  __shared__ float sh[kThreads / 32];
  const int64_t row = blockIdx.x;
  const int n4 = cols / 4;
  const float4* xr = reinterpret_cast<const float4*>(x + row * cols);
  float4* yr = reinterpret_cast<float4*>(y + row * cols);
  float4 v[VPT];
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = threadIdx.x + k * kThreads;
    v[k] = i < n4 ? xr[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    sum += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  const float mean = block_sum(sum, sh) / cols;
  float sq = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < n4) {
      const float dx = v[k].x - mean, dy = v[k].y - mean, dz = v[k].z - mean, dw = v[k].w - mean;
      sq += (dx * dx + dy * dy) + (dz * dz + dw * dw);
    }
  }
  const float rstd = rsqrtf(block_sum(sq, sh) / cols + eps);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  const float4* b4 = reinterpret_cast<const float4*>(b);
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i < n4) {
      const float4 g = w4[i], o = b4[i];
      float4 r;
      r.x = (v[k].x - mean) * rstd * g.x + o.x;
      r.y = (v[k].y - mean) * rstd * g.y + o.y;
      r.z = (v[k].z - mean) * rstd * g.z + o.z;
      r.w = (v[k].w - mean) * rstd * g.w + o.w;
      yr[i] = r;
    }
  }
}

__global__ void __launch_bounds__(256) layernorm_scalar_kernel(const float* __restrict__ x,
                                                               const float* __restrict__ w,
                                                               const float* __restrict__ b,
                                                               float* __restrict__ y, int cols,
                                                               float eps) {
  __shared__ float sh[256 / 32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float sum = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) sum += xr[i];
  const float mean = block_sum(sum, sh) / cols;
  float sq = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float d = xr[i] - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(block_sum(sq, sh) / cols + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
}

extern "C" cudaError_t layernorm_launch(const float* x, const float* w, const float* b, float* y,
                                        int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (rows > 0x7fffffffLL || cols > 0x7fffffffLL) return cudaErrorInvalidValue;
  const uintptr_t bits = reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) |
                         reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(y);
  const int n4 = (int)(cols / 4);
  const unsigned grid = (unsigned)rows;
  if ((bits & 15) == 0 && cols % 4 == 0 && n4 <= 16 * kThreads) {
    const int c = (int)cols;
    if (n4 <= 1 * kThreads) {
      layernorm_vec4_kernel<1><<<grid, kThreads, 0, stream>>>(x, w, b, y, c, eps);
    } else if (n4 <= 2 * kThreads) {
      layernorm_vec4_kernel<2><<<grid, kThreads, 0, stream>>>(x, w, b, y, c, eps);
    } else if (n4 <= 4 * kThreads) {
      layernorm_vec4_kernel<4><<<grid, kThreads, 0, stream>>>(x, w, b, y, c, eps);
    } else if (n4 <= 8 * kThreads) {
      layernorm_vec4_kernel<8><<<grid, kThreads, 0, stream>>>(x, w, b, y, c, eps);
    } else {
      layernorm_vec4_kernel<16><<<grid, kThreads, 0, stream>>>(x, w, b, y, c, eps);
    }
  } else {
    layernorm_scalar_kernel<<<grid, 256, 0, stream>>>(x, w, b, y, (int)cols, eps);
  }
  return cudaGetLastError();
}

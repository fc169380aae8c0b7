// Exact GELU, y = 0.5 x (1 + erf(x / sqrt(2))): float4 grid-stride loop plus a scalar path for
// the tail and for pointers that are not 16-byte aligned.
#include <cuda_runtime.h>

#include <cstdint>

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

struct GeluArgs {
  const float4* x = nullptr;
  float4* y = nullptr;
  int64_t n4 = 0;
};

__global__ void gelu_vec4_kernel(GeluArgs args) {
  const float4* __restrict__ x = args.x;
  float4* __restrict__ y = args.y;
  const int64_t n4 = args.n4;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;
       i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    v.x = gelu(v.x);
    v.y = gelu(v.y);
    v.z = gelu(v.z);
    v.w = gelu(v.w);
    y[i] = v;
  }
}

__global__ void gelu_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start,
                                   int64_t n) {
  for (int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    y[i] = gelu(x[i]);
  }
}

static int grid_for(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  const int64_t cap = 132 * 16;
  return (int)(blocks < cap ? (blocks > 0 ? blocks : 1) : cap);
}

extern "C" cudaError_t gelu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  if (n <= 0) return cudaSuccess;
  bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    GeluArgs args;
    args.x = reinterpret_cast<const float4*>(x);
    args.n4 = n4;
    gelu_vec4_kernel<<<grid_for(n4, threads), threads, 0, stream>>>(args);
  }
  int64_t done = n4 * 4;
  if (done < n) gelu_scalar_kernel<<<grid_for(n - done, threads), threads, 0, stream>>>(x, y, done, n);
  return cudaGetLastError();
}

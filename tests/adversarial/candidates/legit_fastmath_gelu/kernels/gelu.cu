// GELU with fast intrinsics: the tanh form, tanh(u) = 1 - 2 / (exp(2u) + 1) with __expf and
// __fdividef. Its largest deviation from the exact erf GELU is about 1e-3, inside 1e-2.
#include <cuda_runtime.h>

#include <cstdint>

__device__ __forceinline__ float gelu_fast(float v) {
  const float u = 0.7978845608f * (v + 0.044715f * v * v * v);
  const float t = 1.f - __fdividef(2.f, __expf(2.f * u) + 1.f);
  return 0.5f * v * (1.f + t);
}

__global__ void gelu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    v.x = gelu_fast(v.x);
    v.y = gelu_fast(v.y);
    v.z = gelu_fast(v.z);
    v.w = gelu_fast(v.w);
    y[i] = v;
  }
}

__global__ void gelu_tail_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
  int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = gelu_fast(x[i]);
}

extern "C" cudaError_t gelu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0)
    gelu_vec4_kernel<<<132 * 16, 256, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
  if (n4 * 4 < n) gelu_tail_kernel<<<(unsigned)((n - n4 * 4 + 255) / 256), 256, 0, stream>>>(x, y, n4 * 4, n);
  return cudaGetLastError();
}

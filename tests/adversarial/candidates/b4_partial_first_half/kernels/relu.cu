// Computes the first half of the rows only.
#include <cuda_runtime.h>

#include <cstdint>

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.f);
}

extern "C" cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  relu_kernel<<<1024, 256, 0, stream>>>(x, y, n / 2);
  return cudaGetLastError();
}

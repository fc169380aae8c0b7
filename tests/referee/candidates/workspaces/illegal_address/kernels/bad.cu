// Writes through a pointer that is not device memory: the CUDA context is lost.
#include <cuda_runtime.h>

#include <cstdint>

__global__ void bad_write_kernel(float* y, int64_t n) {
  float* nowhere = reinterpret_cast<float*>(0x100);
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) nowhere[i] = y[i];
}

extern "C" cudaError_t bad_write_launch(float* y, int64_t n, cudaStream_t stream) {
  bad_write_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(y, n);
  return cudaGetLastError();
}

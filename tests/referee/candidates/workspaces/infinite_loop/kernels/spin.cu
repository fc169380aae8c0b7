// Never finishes: the worker hangs in its synchronize until the referee's timeout kills it.
#include <cuda_runtime.h>

#include <cstdint>

__global__ void spin_kernel(const float* x, float* y, int64_t n) {
  for (;;) {
    __nanosleep(1000);
  }
}

extern "C" cudaError_t spin_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
  spin_kernel<<<1, 32, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

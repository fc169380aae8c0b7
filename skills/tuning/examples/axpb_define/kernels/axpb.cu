// y = a * x + b. Define tuning: BLOCK and VEC are macros from tune_config.h, which the tuner
// rewrites for each variant it builds; only these values are compiled.
#include <cuda_runtime.h>

#include <cstdint>

#include "tune_config.h"

static_assert(BLOCK >= 32 && BLOCK <= 1024, "BLOCK must be 32..1024");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");

template <int V> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

__global__ void __launch_bounds__(BLOCK) axpb_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t nvec,
                                                     float a, float b) {
  using T = typename Vec<VEC>::T;
  for (int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x; i < nvec; i += (int64_t)gridDim.x * BLOCK) {
    T v = reinterpret_cast<const T*>(x)[i];
    float* f = reinterpret_cast<float*>(&v);
#pragma unroll
    for (int c = 0; c < VEC; ++c) f[c] = fmaf(a, f[c], b);
    reinterpret_cast<T*>(y)[i] = v;
  }
}

extern "C" cudaError_t axpb_launch(const float* x, float* y, int64_t n, float a, float b, cudaStream_t stream) {
  if (n % VEC != 0) return cudaErrorInvalidValue;
  const int64_t nvec = n / VEC;
  int64_t grid = (nvec + BLOCK - 1) / BLOCK;
  if (grid > 65535) grid = 65535;
  axpb_kernel<<<(int)(grid > 0 ? grid : 1), BLOCK, 0, stream>>>(x, y, nvec, a, b);
  return cudaGetLastError();
}

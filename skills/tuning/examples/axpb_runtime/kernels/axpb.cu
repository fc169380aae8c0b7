// y = a * x + b. Runtime tuning: BLOCK is an ordinary launch argument; VEC and UNROLL are
// template parameters, every instantiation compiled once, picked by a switch at launch.
#include <cuda_runtime.h>

#include <cstdint>

template <int VEC> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };


template <int VEC, int UNROLL>
__global__ void axpb_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float a, float b) {
  using T = typename Vec<VEC>::T;
  const int64_t nvec = n / VEC;
  const int64_t tile = (int64_t)blockDim.x * UNROLL;
  for (int64_t base = (int64_t)blockIdx.x * tile; base < nvec; base += (int64_t)gridDim.x * tile) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t i = base + (int64_t)u * blockDim.x + threadIdx.x;
      if (i < nvec) {
        T v = reinterpret_cast<const T*>(x)[i];
        float* f = reinterpret_cast<float*>(&v);
#pragma unroll
        for (int c = 0; c < VEC; ++c) f[c] = fmaf(a, f[c], b);
        reinterpret_cast<T*>(y)[i] = v;
      }
    }
  }
}

template <int VEC, int UNROLL>
static cudaError_t launch(const float* x, float* y, int64_t n, float a, float b, int block, cudaStream_t stream) {
  const int64_t tiles = (n / VEC + (int64_t)block * UNROLL - 1) / ((int64_t)block * UNROLL);
  const int grid = (int)(tiles < 65535 ? (tiles > 0 ? tiles : 1) : 65535);
  axpb_kernel<VEC, UNROLL><<<grid, block, 0, stream>>>(x, y, n, a, b);
  return cudaGetLastError();
}

extern "C" cudaError_t axpb_launch(const float* x, float* y, int64_t n, float a, float b, int block, int vec,
                                   int unroll, cudaStream_t stream) {
  if (n % vec != 0) return cudaErrorInvalidValue;
  switch (vec * 10 + unroll) {  // one case per instantiation declared in kernels/tune.json
    case 11: return launch<1, 1>(x, y, n, a, b, block, stream);
    case 12: return launch<1, 2>(x, y, n, a, b, block, stream);
    case 14: return launch<1, 4>(x, y, n, a, b, block, stream);
    case 21: return launch<2, 1>(x, y, n, a, b, block, stream);
    case 22: return launch<2, 2>(x, y, n, a, b, block, stream);
    case 24: return launch<2, 4>(x, y, n, a, b, block, stream);
    case 41: return launch<4, 1>(x, y, n, a, b, block, stream);
    case 42: return launch<4, 2>(x, y, n, a, b, block, stream);
    case 44: return launch<4, 4>(x, y, n, a, b, block, stream);
    default: return cudaErrorInvalidValue;
  }
}

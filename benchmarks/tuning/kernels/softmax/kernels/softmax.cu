// softmax(x, dim=1) for x [R, N], tunable: TPR threads per row, RPB rows per block, VEC floats
// per load, ALGO 0 = three passes over global memory (max, sum, write), 1 = online max-and-sum
// then write (two passes), 2 = the row cached in shared memory (one global read).
#include <cuda_runtime.h>

#include <cstdint>

#include "dispatch.cuh"
#include "rowops.cuh"

template <int VEC, int ALGO>
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int R, int N, int tpr) {
  using T = typename Vec<VEC>::T;
  __shared__ float scratch[8 * 32];
  extern __shared__ float cache[];
  const int rpb = blockDim.x / tpr;
  const int local = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  const int row = blockIdx.x * rpb + local;
  const bool live = row < R;
  const int nv = N / VEC;
  const T* xr = reinterpret_cast<const T*>(x + (int64_t)(live ? row : 0) * N);
  T* yr = reinterpret_cast<T*>(y + (int64_t)(live ? row : 0) * N);
  T* cr = reinterpret_cast<T*>(cache + (int64_t)local * N);
  float e[VEC];
  float m = -INFINITY, s = 0.f;
  if (live) {
    for (int j = lane; j < nv; j += tpr) {
      T v = xr[j];
      if (ALGO == 2) cr[j] = v;
      unpack(v, e);
#pragma unroll
      for (int c = 0; c < VEC; ++c) {
        if (ALGO == 1) {
          if (e[c] > m) {
            s = s * __expf(m - e[c]) + 1.f;
            m = e[c];
          } else {
            s += __expf(e[c] - m);
          }
        } else {
          m = fmaxf(m, e[c]);
        }
      }
    }
  }
  const float mrow = row_reduce<true>(m, scratch, tpr);
  if (ALGO == 1) {
    s = live && m > -INFINITY ? s * __expf(m - mrow) : 0.f;
  } else if (live) {
    for (int j = lane; j < nv; j += tpr) {
      unpack(ALGO == 2 ? cr[j] : xr[j], e);
#pragma unroll
      for (int c = 0; c < VEC; ++c) s += __expf(e[c] - mrow);
    }
  }
  const float inv = 1.f / row_reduce<false>(s, scratch, tpr);
  if (!live) return;
  for (int j = lane; j < nv; j += tpr) {
    unpack(ALGO == 2 ? cr[j] : xr[j], e);
#pragma unroll
    for (int c = 0; c < VEC; ++c) e[c] = __expf(e[c] - mrow) * inv;
    T out;
    pack(e, out);
    yr[j] = out;
  }
}

extern "C" cudaError_t softmax_launch(const float* x, float* y, int R, int N, int tpr, int rpb, int vec,
                                      int algo, cudaStream_t stream) {
  if (N % vec != 0 || tpr % 32 != 0 || tpr * rpb > 1024 || rpb > 8) return cudaErrorInvalidValue;
  cudaError_t err = cudaErrorInvalidConfiguration;
  bool found = dispatch_int<1, 2, 4>(vec, [&](auto V) {
    dispatch_int<0, 1, 2>(algo, [&](auto A) {
      constexpr int kVec = decltype(V)::value;
      constexpr int kAlgo = decltype(A)::value;
      size_t smem = kAlgo == 2 ? (size_t)rpb * N * sizeof(float) : 0;
      auto kernel = softmax_kernel<kVec, kAlgo>;
      if (smem > 48 * 1024) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return;
      }
      kernel<<<(R + rpb - 1) / rpb, tpr * rpb, smem, stream>>>(x, y, R, N, tpr);
      err = cudaGetLastError();
    });
  });
  return found ? err : cudaErrorInvalidValue;
}

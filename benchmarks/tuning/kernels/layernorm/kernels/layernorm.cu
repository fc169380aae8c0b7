// LayerNorm over the last dimension of x [R, D] with weight and bias, tunable: TPR threads per
// row, RPB rows per block, VEC floats per load, ALGO 0 = mean, then variance around it, then
// write (three reads), 1 = sum and sum of squares together, then write (two reads), 2 = the row
// cached in shared memory (one read).
#include <cuda_runtime.h>

#include <cstdint>

#include "dispatch.cuh"
#include "rowops.cuh"

template <int VEC, int ALGO>
__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int R, int D, float eps,
                                 int tpr) {
  using T = typename Vec<VEC>::T;
  __shared__ float scratch[8 * 32];
  extern __shared__ float cache[];
  const int rpb = blockDim.x / tpr;
  const int local = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  const int row = blockIdx.x * rpb + local;
  const bool live = row < R;
  const int nv = D / VEC;
  const T* xr = reinterpret_cast<const T*>(x + (int64_t)(live ? row : 0) * D);
  T* yr = reinterpret_cast<T*>(y + (int64_t)(live ? row : 0) * D);
  T* cr = reinterpret_cast<T*>(cache + (int64_t)local * D);
  const T* wv = reinterpret_cast<const T*>(w);
  const T* bv = reinterpret_cast<const T*>(b);
  float e[VEC], ew[VEC], eb[VEC];
  float s = 0.f, ss = 0.f;
  if (live) {
    for (int j = lane; j < nv; j += tpr) {
      T v = xr[j];
      if (ALGO == 2) cr[j] = v;
      unpack(v, e);
#pragma unroll
      for (int c = 0; c < VEC; ++c) {
        s += e[c];
        if (ALGO == 1) ss += e[c] * e[c];
      }
    }
  }
  const float mean = row_reduce<false>(s, scratch, tpr) / D;
  float var;
  if (ALGO == 1) {
    var = fmaxf(row_reduce<false>(ss, scratch, tpr) / D - mean * mean, 0.f);
  } else {
    float dev = 0.f;
    if (live) {
      for (int j = lane; j < nv; j += tpr) {
        unpack(ALGO == 2 ? cr[j] : xr[j], e);
#pragma unroll
        for (int c = 0; c < VEC; ++c) dev += (e[c] - mean) * (e[c] - mean);
      }
    }
    var = row_reduce<false>(dev, scratch, tpr) / D;
  }
  const float rstd = rsqrtf(var + eps);
  if (!live) return;
  for (int j = lane; j < nv; j += tpr) {
    unpack(ALGO == 2 ? cr[j] : xr[j], e);
    unpack(wv[j], ew);
    unpack(bv[j], eb);
#pragma unroll
    for (int c = 0; c < VEC; ++c) e[c] = (e[c] - mean) * rstd * ew[c] + eb[c];
    T out;
    pack(e, out);
    yr[j] = out;
  }
}

extern "C" cudaError_t layernorm_launch(const float* x, const float* w, const float* b, float* y, int R, int D,
                                        float eps, int tpr, int rpb, int vec, int algo, cudaStream_t stream) {
  if (D % vec != 0 || tpr % 32 != 0 || tpr * rpb > 1024 || rpb > 8) return cudaErrorInvalidValue;
  cudaError_t err = cudaErrorInvalidConfiguration;
  bool found = dispatch_int<1, 2, 4>(vec, [&](auto V) {
    dispatch_int<0, 1, 2>(algo, [&](auto A) {
      constexpr int kVec = decltype(V)::value;
      constexpr int kAlgo = decltype(A)::value;
      size_t smem = kAlgo == 2 ? (size_t)rpb * D * sizeof(float) : 0;
      auto kernel = layernorm_kernel<kVec, kAlgo>;
      if (smem > 48 * 1024) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess) return;
      }
      kernel<<<(R + rpb - 1) / rpb, tpr * rpb, smem, stream>>>(x, w, b, y, R, D, eps, tpr);
      err = cudaGetLastError();
    });
  });
  return found ? err : cudaErrorInvalidValue;
}

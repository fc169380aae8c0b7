// C = A @ B in fp32 with 2-D register tiling: a block computes a BM x BN tile of C with
// (BM/TM) x (BN/TN) threads, each accumulating TM x TN outputs over K in steps of BK staged in
// shared memory. Each output sums over k in order, so every configuration gives the same bits.
#pragma once
#include <cuda_runtime.h>

#include "dispatch.cuh"

template <int BM, int BN, int BK, int TM, int TN>
constexpr bool sgemm_valid() {
  constexpr int threads = (BM / TM) * (BN / TN);
  return threads >= 32 && threads <= 1024 && (BM * BK) % threads == 0 && (BK * BN) % threads == 0 &&
         (BM * BK + BK * BN) * 4 <= 48 * 1024;
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    sgemm_kernel(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
                 float* __restrict__ C) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN];
#pragma unroll
  for (int m = 0; m < TM; ++m)
#pragma unroll
    for (int n = 0; n < TN; ++n) acc[m][n] = 0.f;
  float ra[TM], rb[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = tid; i < BM * BK; i += kThreads) {
      const int m = i / BK, k = i % BK;
      const int gm = row0 + m, gk = k0 + k;
      As[k][m] = (gm < M && gk < K) ? A[(size_t)gm * K + gk] : 0.f;
    }
#pragma unroll
    for (int i = tid; i < BK * BN; i += kThreads) {
      const int k = i / BN, n = i % BN;
      const int gk = k0 + k, gn = col0 + n;
      Bs[k][n] = (gk < K && gn < N) ? B[(size_t)gk * N + gn] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int m = 0; m < TM; ++m) ra[m] = As[k][ty * TM + m];
#pragma unroll
      for (int n = 0; n < TN; ++n) rb[n] = Bs[k][tx * TN + n];
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m][n] = fmaf(ra[m], rb[n], acc[m][n]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    const int gm = row0 + ty * TM + m;
#pragma unroll
    for (int n = 0; n < TN; ++n) {
      const int gn = col0 + tx * TN + n;
      if (gm < M && gn < N) C[(size_t)gm * N + gn] = acc[m][n];
    }
  }
}

template <int BM, int BN>
cudaError_t sgemm_bmbn(int bk, int tm, int tn, int M, int N, int K, const float* A, const float* B, float* C,
                       cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  dispatch_int<8, 16, 32>(bk, [&](auto BKc) {
    dispatch_int<2, 4, 8>(tm, [&](auto TMc) {
      dispatch_int<2, 4, 8>(tn, [&](auto TNc) {
        constexpr int kBK = decltype(BKc)::value, kTM = decltype(TMc)::value, kTN = decltype(TNc)::value;
        if constexpr (sgemm_valid<BM, BN, kBK, kTM, kTN>()) {
          dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
          sgemm_kernel<BM, BN, kBK, kTM, kTN><<<grid, (BM / kTM) * (BN / kTN), 0, stream>>>(M, N, K, A, B, C);
          err = cudaGetLastError();
        }
      });
    });
  });
  return err;
}

#define SGEMM_INSTANCE(BM_, BN_)                                                                           \
  extern "C" cudaError_t sgemm_##BM_##x##BN_(int bk, int tm, int tn, int M, int N, int K, const float* A,  \
                                             const float* B, float* C, cudaStream_t stream) {              \
    return sgemm_bmbn<BM_, BN_>(bk, tm, tn, M, N, K, A, B, C, stream);                                      \
  }

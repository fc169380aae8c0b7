// y = x^T for x [M, N], through a TILE x TILE shared-memory tile (PAD extra column against bank
// conflicts), TILE x BR threads per block (each copies TILE / BR rows), COARSEN tiles per block.
#include <cuda_runtime.h>

#include <cstdint>

#include "dispatch.cuh"

template <int TILE, int PAD>
__global__ void transpose_kernel(const float* __restrict__ x, float* __restrict__ y, int M, int N, int coarsen) {
  __shared__ float tile[TILE][TILE + PAD];
  const int br = blockDim.y;
  const int col = blockIdx.x * TILE + threadIdx.x;
  for (int c = 0; c < coarsen; ++c) {
    const int by = blockIdx.y * coarsen + c;
    if (by * TILE >= M) break;
    for (int r = threadIdx.y; r < TILE; r += br) {
      const int row = by * TILE + r;
      if (row < M && col < N) tile[r][threadIdx.x] = x[(int64_t)row * N + col];
    }
    __syncthreads();
    const int ocol = by * TILE + threadIdx.x;
    for (int r = threadIdx.y; r < TILE; r += br) {
      const int orow = blockIdx.x * TILE + r;
      if (orow < N && ocol < M) y[(int64_t)orow * M + ocol] = tile[threadIdx.x][r];
    }
    __syncthreads();
  }
}

extern "C" cudaError_t transpose_launch(const float* x, float* y, int M, int N, int tile, int br, int pad,
                                        int coarsen, cudaStream_t stream) {
  if (br > tile || tile * br > 1024 || coarsen < 1) return cudaErrorInvalidValue;
  cudaError_t err = cudaErrorInvalidConfiguration;
  bool found = dispatch_int<8, 16, 32, 64>(tile, [&](auto T) {
    dispatch_int<0, 1>(pad, [&](auto P) {
      constexpr int kTile = decltype(T)::value;
      constexpr int kPad = decltype(P)::value;
      const int tiles_m = (M + kTile - 1) / kTile;
      dim3 grid((N + kTile - 1) / kTile, (tiles_m + coarsen - 1) / coarsen);
      transpose_kernel<kTile, kPad><<<grid, dim3(kTile, br), 0, stream>>>(x, y, M, N, coarsen);
      err = cudaGetLastError();
    });
  });
  return found ? err : cudaErrorInvalidValue;
}

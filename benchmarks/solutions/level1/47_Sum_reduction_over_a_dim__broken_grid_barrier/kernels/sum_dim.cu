// Sum over one dimension of a contiguous tensor viewed as (outer, R, inner), in two phases inside
// one kernel: every block sums a slice of R for 32 columns into a scratch buffer, all blocks meet
// at a grid-wide barrier (a global arrival counter), then the blocks of slice 0 add the partials.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kCols = 32;
constexpr int kSplit = 32;
constexpr int kSlices = 16;  // R is cut into this many slices, one per blockIdx.y

__global__ void __launch_bounds__(kCols* kSplit) sum_dim_kernel(const float* __restrict__ x,
                                                                 float* __restrict__ y,
                                                                 float* __restrict__ partials,
                                                                 unsigned int* arrived, int64_t outer,
                                                                 int64_t R, int64_t inner) {
  __shared__ float part[kSplit][kCols];
  const int64_t items = outer * inner;
  const int64_t c = (int64_t)blockIdx.x * kCols + threadIdx.x;
  const int64_t slice = (R + kSlices - 1) / kSlices;
  const int64_t r_begin = blockIdx.y * slice;
  const int64_t r_end = r_begin + slice < R ? r_begin + slice : R;
  float acc = 0.f;
  if (c < items) {
    const int64_t o = c / inner, j = c - o * inner;
    const float* base = x + o * R * inner + j;
    for (int64_t r = r_begin + threadIdx.y; r < r_end; r += kSplit) acc += base[r * inner];
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < items) {
    float t = 0.f;
    for (int k = 0; k < kSplit; ++k) t += part[k][threadIdx.x];
    partials[blockIdx.y * items + c] = t;
  }
  // Grid-wide barrier: wait until every block has written its partials.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    atomicAdd(arrived, 1u);
    const unsigned int total = gridDim.x * gridDim.y;
    while (atomicAdd(arrived, 0u) < total) {
      __nanosleep(100);
    }
  }
  __syncthreads();
  if (blockIdx.y == 0 && threadIdx.y == 0 && c < items) {
    float t = 0.f;
    for (int s = 0; s < kSlices; ++s) t += partials[s * items + c];
    y[c] = t;
  }
}

extern "C" cudaError_t sum_dim_launch(const float* x, float* y, float* partials, unsigned int* arrived,
                                      int64_t outer, int64_t R, int64_t inner, cudaStream_t stream) {
  if (outer <= 0 || inner <= 0) return cudaSuccess;
  cudaError_t err = cudaMemsetAsync(arrived, 0, sizeof(unsigned int), stream);
  if (err != cudaSuccess) return err;
  const int64_t items = outer * inner;
  const dim3 grid((unsigned)((items + kCols - 1) / kCols), kSlices);
  sum_dim_kernel<<<grid, dim3(kCols, kSplit), 0, stream>>>(x, y, partials, arrived, outer, R, inner);
  return cudaGetLastError();
}

// Sum over one dimension of a contiguous tensor viewed as (outer, R, inner): out[o, j] =
// sum_r x[o, r, j]. A 32 x 32 thread block: threadIdx.x walks 32 adjacent output columns (so each
// warp reads 32 consecutive float4s, fully coalesced), threadIdx.y splits the reduced dimension
// 32 ways; the 32 partial sums per column are combined through shared memory. float4 columns
// when inner is a multiple of 4 and the pointers are 16-byte aligned, scalar columns otherwise.
#include <cuda_runtime.h>

#include <cstdint>

constexpr int kCols = 32;
constexpr int kSplit = 32;

template <bool VEC>
__global__ void __launch_bounds__(kCols* kSplit) sum_dim_kernel(const float* __restrict__ x,
                                                                 float* __restrict__ y, int64_t outer,
                                                                 int64_t R, int64_t inner) {
  __shared__ float4 part[kSplit][kCols];
  constexpr int W = VEC ? 4 : 1;  // floats per column item
  const int64_t inner_items = inner / W;
  const int64_t items = outer * inner_items;
  const int64_t c = (int64_t)blockIdx.x * kCols + threadIdx.x;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  int64_t o = 0, j = 0;
  if (c < items) {
    o = c / inner_items;
    j = (c - o * inner_items) * W;
    const float* base = x + o * R * inner + j;
    if (VEC) {
#pragma unroll 4
      for (int64_t r = threadIdx.y; r < R; r += kSplit) {
        const float4 v = *reinterpret_cast<const float4*>(base + r * inner);
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
      }
    } else {
#pragma unroll 4
      for (int64_t r = threadIdx.y; r < R; r += kSplit) acc.x += base[r * inner];
    }
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < items) {
    float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < kSplit; ++k) {
      const float4 p = part[k][threadIdx.x];
      t.x += p.x;
      t.y += p.y;
      t.z += p.z;
      t.w += p.w;
    }
    float* out = y + o * inner + j;
    if (VEC) {
      *reinterpret_cast<float4*>(out) = t;
    } else {
      *out = t.x;
    }
  }
}

extern "C" cudaError_t sum_dim_launch(const float* x, float* y, int64_t outer, int64_t R, int64_t inner,
                                      cudaStream_t stream) {
  if (outer <= 0 || inner <= 0) return cudaSuccess;
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  const bool vec = aligned && inner % 4 == 0;
  const int64_t items = outer * (vec ? inner / 4 : inner);
  const int64_t blocks = (items + kCols - 1) / kCols;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  const dim3 block(kCols, kSplit);
  if (vec) {
    sum_dim_kernel<true><<<(unsigned)blocks, block, 0, stream>>>(x, y, outer, R, inner);
  } else {
    sum_dim_kernel<false><<<(unsigned)blocks, block, 0, stream>>>(x, y, outer, R, inner);
  }
  return cudaGetLastError();
}

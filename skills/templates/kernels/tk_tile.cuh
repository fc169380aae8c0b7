// Shared by the direct tiled families (dwconv.cu, pool.cu): a block computes a tile of
// (ROWS * OUT_H) x (BLOCK_W * OUT_W) outputs of one plane from the input patch the tile needs,
// halo and padding included, staged in shared memory. Included at file scope after the stage's
// unnamed namespace, whose slots and constants (kOH, kOW, kH, kW, kKH, kKW, kSH, kSW, kPH, kPW,
// kDH, kDW) it uses; its names join that namespace.
#pragma once
#include "tk_common.cuh"

namespace {

constexpr int kTileH = ROWS * OUT_H;
constexpr int kTileW = BLOCK_W * OUT_W;
constexpr int kInTileH = (kTileH - 1) * (int)kSH + ((int)kKH - 1) * (int)kDH + 1;
constexpr int kInTileW = (kTileW - 1) * (int)kSW + ((int)kKW - 1) * (int)kDW + 1;
constexpr int64_t kTilesW = (kOW + kTileW - 1) / kTileW;
constexpr int64_t kTilesH = (kOH + kTileH - 1) / kTileH;
static_assert(kInTileH * kInTileW * 4 <= 48 * 1024, "the input patch must fit in static shared memory");
static_assert(BLOCK_W * ROWS <= 1024, "at most 1024 threads per block");

// This block's tile: its first output (oh0, ow0) and the input element its patch starts at.
struct Tile {
  int64_t oh0, ow0, ih0, iw0;
};
__device__ __forceinline__ Tile this_tile() {
  const int64_t oh0 = (blockIdx.x / kTilesW) * kTileH, ow0 = (blockIdx.x % kTilesW) * kTileW;
  return {oh0, ow0, oh0 * kSH - kPH, ow0 * kSW - kPW};
}

// The patch of the plane at `src` (kH x kW): what lies outside the plane reads `fill`. The
// caller syncs before (the previous patch is no longer read) and after. A 2D patch is loaded
// kPatchBatch floats a thread before any is stored; a 1D patch (one input row) one at a time.
// Measured on an H200 (KernelBench level 1): batches of 8 took the depthwise convolutions from
// 1.5-1.6x torch.compile to 2.0-2.7x and average pooling 2D from 1.01x to 1.39x, but read a 1D
// pool's patch slower (problems 41 and 44: 57% -> 53% and 52% -> 49% of the bandwidth floor;
// one round of 9 loads with 256 threads: 47% and 41%).
constexpr int kPatch = kInTileH * kInTileW;
constexpr int kPatchThreads = BLOCK_W * ROWS;
constexpr int kPatchBatch = 8;
__device__ __forceinline__ void load_patch(float* patch, const float* __restrict__ src, const Tile& t, float fill) {
  const int tid = threadIdx.y * BLOCK_W + threadIdx.x;
  if constexpr (kInTileH == 1) {
    for (int k = tid; k < kPatch; k += kPatchThreads) {
      const int64_t ih = t.ih0, iw = t.iw0 + k;
      patch[k] = (ih >= 0 && ih < kH && iw >= 0 && iw < kW) ? __ldg(src + ih * kW + iw) : fill;
    }
    return;
  }
  for (int k0 = 0; k0 < kPatch; k0 += kPatchThreads * kPatchBatch) {
    float v[kPatchBatch];
#pragma unroll
    for (int b = 0; b < kPatchBatch; ++b) {
      const int k = k0 + b * kPatchThreads + tid;
      const int64_t ih = t.ih0 + k / kInTileW, iw = t.iw0 + k % kInTileW;
      v[b] = (k < kPatch && ih >= 0 && ih < kH && iw >= 0 && iw < kW) ? __ldg(src + ih * kW + iw) : fill;
    }
#pragma unroll
    for (int b = 0; b < kPatchBatch; ++b) {
      const int k = k0 + b * kPatchThreads + tid;
      if (k < kPatch) patch[k] = v[b];
    }
  }
}

// One block per tile of a plane (x), planes walked by a grid stride (y).
inline dim3 tile_grid(int64_t planes) {
  return dim3((unsigned)(kTilesH * kTilesW), (unsigned)(planes < 65535 ? planes : 65535));
}

}  // namespace

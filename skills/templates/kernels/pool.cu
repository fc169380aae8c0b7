// Pooling family, direct: max or average over a window of 2 or 3 spatial dimensions (1D arrives
// as 2D of height 1; 2D runs as 3D of depth 1), with PyTorch's stride, padding, dilation (max),
// ceil_mode (in the output's size), count_include_pad and divisor_override (average). Max pooling's
// indices are not computed. Inductor falls back to ATen for windows over 25 elements, and its own
// pooling kernels ran at 21-39% of the memory-bandwidth floor on an H200 (KernelBench level 1,
// problems 42, 43, 45, 46).
// A block computes a tile of (ROWS * OUT_H) x (BLOCK_W * OUT_W) outputs of one (n, c, od) plane.
// For each depth of the window, the input rows the tile needs (halo and padding included) are
// staged in shared memory and folded into the outputs held in registers. The fused epilogue is
// applied to each output as it is stored. Slots: BLOCK_W, ROWS (config: threads per block along W
// and H), OUT_W, OUT_H (compute: outputs per thread, strided by the block's size so stores stay
// coalesced), FAST.
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "tk_common.cuh"

namespace {

{{CONSTANTS}}

{{EPI}}

// Max pooling ignores the padding (it never wins); average pooling counts it as zeros.
__device__ __forceinline__ float pad_value() { return kMax ? -INFINITY : 0.0f; }

__device__ __forceinline__ void fold(float& acc, float v) {
  if (kMax) {
    if (v > acc || isnan(v)) acc = v;  // NaN propagates, as in PyTorch
  } else {
    acc += v;
  }
}

// PyTorch's divisor of an average window starting at (d0, h0, w0) before clipping.
__device__ __forceinline__ float avg_divisor(int64_t d0, int64_t h0, int64_t w0) {
  if (kDivisor != 0) return (float)kDivisor;
  int64_t d1 = d0 + kKD, h1 = h0 + kKH, w1 = w0 + kKW;
  d1 = d1 < kD + kPD ? d1 : kD + kPD;
  h1 = h1 < kH + kPH ? h1 : kH + kPH;
  w1 = w1 < kW + kPW ? w1 : kW + kPW;
  const int64_t with_pad = (d1 - d0) * (h1 - h0) * (w1 - w0);
  if (kCountIncludePad) return (float)with_pad;
  d0 = d0 > 0 ? d0 : 0, h0 = h0 > 0 ? h0 : 0, w0 = w0 > 0 ? w0 : 0;
  d1 = d1 < kD ? d1 : kD, h1 = h1 < kH ? h1 : kH, w1 = w1 < kW ? w1 : kW;
  return (float)((d1 - d0) * (h1 - h0) * (w1 - w0));
}

}  // namespace

#include "tk_tile.cuh"

namespace {

__global__ void __launch_bounds__(BLOCK_W * ROWS) pool_kernel(tk::Ptrs P, const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float patch[kInTileH * kInTileW];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const Tile tile = this_tile();
  for (int64_t plane = blockIdx.y; plane < kN * kC * kOD; plane += gridDim.y) {
    const int64_t nc = plane / kOD, od = plane % kOD;
    const int64_t id0 = od * kSD - kPD;
    float acc[OUT_H][OUT_W];
#pragma unroll
    for (int a = 0; a < OUT_H; ++a)
#pragma unroll
      for (int b = 0; b < OUT_W; ++b) acc[a][b] = pad_value();
    for (int kd = 0; kd < (int)kKD; ++kd) {
      const int64_t id = id0 + kd * kDD;
      if (id < 0 || id >= kD) continue;  // a padding slice (the whole block's): adds 0, never wins
      const float* src = x + (nc * kD + id) * kH * kW;
      __syncthreads();  // the previous slice's patch is no longer read
      load_patch(patch, src, tile, pad_value());
      __syncthreads();
#pragma unroll
      for (int a = 0; a < OUT_H; ++a) {
        const int r = ty + a * ROWS;
#pragma unroll
        for (int b = 0; b < OUT_W; ++b) {
          const int s = tx + b * BLOCK_W;
#pragma unroll
          for (int kh = 0; kh < (int)kKH; ++kh) {
            const float* row = patch + (r * (int)kSH + kh * (int)kDH) * kInTileW + s * (int)kSW;
#pragma unroll
            for (int kw = 0; kw < (int)kKW; ++kw) fold(acc[a][b], row[kw * (int)kDW]);
          }
        }
      }
    }
    float* dst = y + plane * kOH * kOW;
#pragma unroll
    for (int a = 0; a < OUT_H; ++a) {
      const int64_t oh = tile.oh0 + ty + a * ROWS;
#pragma unroll
      for (int b = 0; b < OUT_W; ++b) {
        const int64_t ow = tile.ow0 + tx + b * BLOCK_W;
        if (oh >= kOH || ow >= kOW) continue;
        float value = acc[a][b];
        if (!kMax) value /= avg_divisor(id0, oh * kSH - kPH, ow * kSW - kPW);
        const int64_t i = plane * kOH * kOW + oh * kOW + ow;
        float res[1][1];
        epi<1>(P, i, &value, res);
        dst[oh * kOW + ow] = res[0][0];
      }
    }
  }
}

}  // namespace

extern "C" size_t {{NS}}_scratch_bytes() { return 0; }

extern "C" cudaError_t {{NS}}_launch(const float* const* ins, void* const* outs, void* scratch,
                                     cudaStream_t stream) {
  (void)scratch;
  tk::Ptrs P{};
{{BIND_INPUTS}}
  const float* x = ins[0] + kOffsetX;
  float* y = static_cast<float*>(outs[0]);
  pool_kernel<<<tile_grid(kN * kC * kOD), dim3(BLOCK_W, ROWS), 0, stream>>>(P, x, y);
  return cudaGetLastError();
}

// Depthwise convolution family, direct (1D as 2D of height 1, 2D): every output channel c reads
// one input channel, c / kMult, through its own KH x KW filter, with any stride, padding and
// dilation. cuDNN's depthwise kernels ran at 4-25% of the memory-bandwidth floor on an H200
// (KernelBench level 1, problems 82-86), and torch.compile calls the same cuDNN.
// A block computes a tile of (ROWS * OUT_H) x (BLOCK_W * OUT_W) outputs of one (n, c) plane:
// the input patch the tile needs, halo and padding included, is staged once in shared memory,
// the filter sits in registers, and the fused epilogue (bias, activation, ...) is applied to each
// output as it is stored. Slots: BLOCK_W, ROWS (config: threads per block along W and H), OUT_W,
// OUT_H (compute: outputs per thread along W and H, strided by the block's size so stores stay
// coalesced), FAST.
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "tk_common.cuh"

namespace {

{{CONSTANTS}}

{{EPI}}

}  // namespace

#include "tk_tile.cuh"

namespace {

__global__ void __launch_bounds__(BLOCK_W * ROWS)
    dwconv_kernel(tk::Ptrs P, const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y) {
  __shared__ float patch[kInTileH * kInTileW];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const Tile tile = this_tile();
  for (int64_t plane = blockIdx.y; plane < kN * kCOut; plane += gridDim.y) {
    const int64_t n = plane / kCOut, c = plane % kCOut;
    const float* src = x + (n * kCIn + c / kMult) * kH * kW;
    float filter[kKH * kKW];
#pragma unroll
    for (int k = 0; k < kKH * kKW; ++k) filter[k] = __ldg(w + c * kKH * kKW + k);
    __syncthreads();  // the previous plane's patch is no longer read
    load_patch(patch, src, tile, 0.0f);
    __syncthreads();
    float* dst = y + plane * kOH * kOW;
#pragma unroll
    for (int a = 0; a < OUT_H; ++a) {
      const int r = ty + a * ROWS;  // the output row within the tile
      const int64_t oh = tile.oh0 + r;
#pragma unroll
      for (int b = 0; b < OUT_W; ++b) {
        const int s = tx + b * BLOCK_W;  // the output column within the tile
        const int64_t ow = tile.ow0 + s;
        if (oh >= kOH || ow >= kOW) continue;
        float acc = 0.0f;
#pragma unroll
        for (int kh = 0; kh < kKH; ++kh) {
          const float* row = patch + (r * (int)kSH + kh * (int)kDH) * kInTileW + s * (int)kSW;
#pragma unroll
          for (int kw = 0; kw < kKW; ++kw) acc = fmaf(row[kw * (int)kDW], filter[kh * kKW + kw], acc);
        }
        const int64_t i = plane * kOH * kOW + oh * kOW + ow;
        float res[1][1];
        epi<1>(P, i, &acc, res);
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
  const float* w = ins[1] + kOffsetW;
  float* y = static_cast<float*>(outs[0]);
  dwconv_kernel<<<tile_grid(kN * kCOut), dim3(BLOCK_W, ROWS), 0, stream>>>(P, x, w, y);
  return cudaGetLastError();
}

// The in-place epilogue pass of the library-call families (gemm.cu, conv.cu): the fused
// elementwise chain applied to the library's output, vectorized by EPI_VEC with a scalar tail.
// Included at file scope after the stage's unnamed namespace, whose kNumel, kEpilogue, kSmCount
// and epi<V> it uses (the kernels join that namespace, so their names stay the stage's own).
#pragma once
#include "tk_common.cuh"

static_assert(EPI_VEC == 1 || EPI_VEC == 2 || EPI_VEC == 4, "EPI_VEC must be 1, 2 or 4");

namespace {

__global__ void __launch_bounds__(EPI_BLOCK) epilogue_kernel(tk::Ptrs P, float* y, int64_t nvec) {
  for (int64_t v = (int64_t)blockIdx.x * EPI_BLOCK + threadIdx.x; v < nvec; v += (int64_t)gridDim.x * EPI_BLOCK) {
    float x[EPI_VEC];
    tk::load_vec<EPI_VEC>(x, y + v * EPI_VEC);
    float res[1][EPI_VEC];
    epi<EPI_VEC>(P, v * EPI_VEC, x, res);
    tk::store_vec<EPI_VEC>(y + v * EPI_VEC, res[0]);
  }
}

__global__ void epilogue_tail(tk::Ptrs P, float* y, int64_t start) {
  const int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kNumel) return;
  float x[1] = {y[i]};
  float res[1][1];
  epi<1>(P, i, x, res);
  y[i] = res[0][0];
}

cudaError_t launch_epilogue(const tk::Ptrs& P, float* y, cudaStream_t stream) {
  if (kEpilogue) {
    const int64_t nvec = kNumel / EPI_VEC;
    if (nvec > 0) {
      int64_t blocks = (nvec + EPI_BLOCK - 1) / EPI_BLOCK;
      const int64_t cap = (int64_t)kSmCount * 16;
      if (blocks > cap) blocks = cap;
      epilogue_kernel<<<(unsigned)blocks, EPI_BLOCK, 0, stream>>>(P, y, nvec);
    }
    const int64_t rest = kNumel - nvec * EPI_VEC;
    if (rest > 0) epilogue_tail<<<(unsigned)((rest + 255) / 256), 256, 0, stream>>>(P, y, nvec * EPI_VEC);
  }
  return cudaGetLastError();
}

}  // namespace

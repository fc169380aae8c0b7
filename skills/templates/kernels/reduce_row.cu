// Reduction family, rows: out[row] = epi(reduce_{r < R} src(row * R + r)) for every row, where
// src is the fused prologue (the input itself when nothing is fused). Strategies (the reduction
// agent's STRATEGY slot): 0 a warp per row (short rows), 1 a block per row, 2 SPLIT blocks per
// row writing partials merged by a second kernel, or with ATOMIC (sum/mean, no epilogue) added
// straight into the zeroed output with atomicAdd. Slots: BLOCK (config), VEC (memory), UNROLL
// (compute: independent accumulators per thread), FAST (compute), STRATEGY, SPLIT, ATOMIC
// (reduction). Constraints: R % VEC == 0 when VEC > 1; SPLIT > 1 exactly when STRATEGY == 2.
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "reduce_acc.cuh"

static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");
static_assert(STRATEGY >= 0 && STRATEGY <= 2, "STRATEGY is 0 (warp), 1 (block) or 2 (split)");

namespace {

{{CONSTANTS}}
using OutT = {{OUT_T}};
constexpr bool kArg = kOp == 5 || kOp == 6;
static_assert(!ATOMIC || kAtomicOk, "ATOMIC needs a sum or mean without an epilogue");
static_assert(VEC == 1 || kR % VEC == 0, "VEC must divide the row length");

{{SRC}}

{{EPI}}

__device__ __forceinline__ tk::Acc row_partial(const tk::Ptrs& P, int64_t row, int64_t begin, int64_t end,
                                               int t, int nt) {
  tk::Acc s[UNROLL];
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) s[u] = tk::acc_init<kOp>();
  const int64_t base = row * kR, step = (int64_t)nt * VEC;
  int64_t r = begin + (int64_t)t * VEC;
  for (; r + (UNROLL - 1) * step < end; r += UNROLL * step) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      float x[1][VEC];
      src<VEC>(P, base + r + u * step, nullptr, x);
#pragma unroll
      for (int l = 0; l < VEC; ++l) tk::acc_add<kOp>(s[u], x[0][l], r + u * step + l);
    }
  }
  for (; r < end; r += step) {
    float x[1][VEC];
    src<VEC>(P, base + r, nullptr, x);
#pragma unroll
    for (int l = 0; l < VEC; ++l) tk::acc_add<kOp>(s[0], x[0][l], r + l);
  }
#pragma unroll
  for (int u = 1; u < UNROLL; ++u) s[0] = tk::acc_merge<kOp>(s[0], s[u]);
  return s[0];
}

__device__ __forceinline__ void finish(const tk::Ptrs& P, OutT* out, int64_t row, tk::Acc s) {
  if constexpr (kArg) {
    out[row] = (OutT)s.i;
  } else {
    const float v = tk::acc_value<kOp>(s, kR);
    float res[1][1];
    epi<1>(P, row, &v, res);
    out[row] = (OutT)res[0][0];
  }
}

__global__ void __launch_bounds__(BLOCK) row_warp(tk::Ptrs P, OutT* out) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * (BLOCK / 32) + (threadIdx.x >> 5);
  if (row >= kRows) return;
  const tk::Acc s = tk::warp_reduce<kOp>(row_partial(P, row, 0, kR, lane, 32));
  if (lane == 0) finish(P, out, row, s);
}

__global__ void __launch_bounds__(BLOCK) row_block(tk::Ptrs P, OutT* out) {
  for (int64_t row = blockIdx.x; row < kRows; row += gridDim.x) {
    const tk::Acc s = tk::block_reduce<kOp, BLOCK>(row_partial(P, row, 0, kR, threadIdx.x, BLOCK));
    if (threadIdx.x == 0) finish(P, out, row, s);
  }
}

constexpr int64_t kChunk = ((kR + SPLIT - 1) / SPLIT + VEC - 1) / VEC * VEC;

__global__ void __launch_bounds__(BLOCK) row_split(tk::Ptrs P, tk::Acc* partial, OutT* out) {
  const int64_t row = blockIdx.x / SPLIT;
  const int64_t begin = (blockIdx.x % SPLIT) * kChunk;
  const int64_t end = begin + kChunk < kR ? begin + kChunk : kR;
  const tk::Acc s = tk::block_reduce<kOp, BLOCK>(row_partial(P, row, begin, end, threadIdx.x, BLOCK));
  if (threadIdx.x != 0) return;
  if constexpr (ATOMIC && !kArg) {
    atomicAdd(reinterpret_cast<float*>(out) + row, kOp == 1 ? s.a / (float)kR : s.a);
  } else {
    partial[blockIdx.x] = s;
  }
}

__global__ void row_merge(tk::Ptrs P, const tk::Acc* partial, OutT* out) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= kRows) return;
  tk::Acc s = tk::acc_init<kOp>();
  for (int p = lane; p < SPLIT; p += 32) s = tk::acc_merge<kOp>(s, partial[row * SPLIT + p]);
  s = tk::warp_reduce<kOp>(s);
  if (lane == 0) finish(P, out, row, s);
}

}  // namespace

extern "C" size_t {{NS}}_scratch_bytes() {
  return STRATEGY == 2 && !ATOMIC ? (size_t)kRows * SPLIT * sizeof(tk::Acc) : 0;
}

extern "C" cudaError_t {{NS}}_launch(const float* const* ins, void* const* outs, void* scratch,
                                     cudaStream_t stream) {
  tk::Ptrs P{};
{{BIND_INPUTS}}
  OutT* out = static_cast<OutT*>(outs[0]);
  if (STRATEGY == 0) {
    const int64_t rows_per_block = BLOCK / 32;
    row_warp<<<(unsigned)((kRows + rows_per_block - 1) / rows_per_block), BLOCK, 0, stream>>>(P, out);
  } else if (STRATEGY == 1) {
    const int64_t blocks = kRows < (int64_t)kSmCount * 32 ? kRows : (int64_t)kSmCount * 32;
    row_block<<<(unsigned)blocks, BLOCK, 0, stream>>>(P, out);
  } else {
    if (ATOMIC) {
      cudaError_t err = cudaMemsetAsync(out, 0, (size_t)kRows * sizeof(OutT), stream);
      if (err != cudaSuccess) return err;
    }
    tk::Acc* partial = static_cast<tk::Acc*>(scratch);
    row_split<<<(unsigned)(kRows * SPLIT), BLOCK, 0, stream>>>(P, partial, out);
    if (!ATOMIC) row_merge<<<(unsigned)((kRows + 7) / 8), 256, 0, stream>>>(P, partial, out);
  }
  return cudaGetLastError();
}

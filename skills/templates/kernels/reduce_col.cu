// Reduction family, columns: the input is [OUTER, R, INNER] (INNER > 1) and out[o, j] =
// epi(reduce_r src((o * R + r) * INNER + j)). Neighbouring threads take neighbouring columns,
// so every load is coalesced. Strategies (STRATEGY): 0 a thread per VEC columns looping over r,
// 1 a tile of 32 x VEC columns per block with BLOCK / 32 rows of threads splitting r and a
// shared-memory merge, 2 SPLIT slices of r over grid.y writing partials (or atomicAdd with
// ATOMIC) merged by a second kernel. Slots: BLOCK (config), VEC (memory), UNROLL, FAST
// (compute), STRATEGY, SPLIT, ATOMIC (reduction). Constraint: INNER % VEC == 0 when VEC > 1.
// With kApply (a fused column apply, RMSNorm over channels) the output is the whole input space:
// out[(o * R + r) * INNER + j] = apply(x, epi(reduce)), x the source's first operand, which a
// thread of col_apply holds in registers for its VEC columns (STRATEGY 0, UNROLL 1, R * VEC <= 128,
// R * VEC * BLOCK <= 32768: a block within a SM's registers).
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "reduce_acc.cuh"

static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");

namespace {

{{CONSTANTS}}
using OutT = {{OUT_T}};
constexpr bool kArg = kOp == 5 || kOp == 6;
constexpr int64_t kOutputs = kOuter * kInner;
static_assert(!ATOMIC || kAtomicOk, "ATOMIC needs a sum or mean without an epilogue");
static_assert(VEC == 1 || kInner % VEC == 0, "VEC must divide INNER");
static_assert(!kApply || (STRATEGY == 0 && UNROLL == 1 && kR * VEC <= 128 && !kArg),
              "a column apply holds its R x VEC values in registers: STRATEGY 0, UNROLL 1, R * VEC <= 128");

{{SRC}}

{{EPI}}

{{SRC_V}}

{{APPLY}}

__device__ __forceinline__ void finish(const tk::Ptrs& P, OutT* out, int64_t q, tk::Acc s) {
  if constexpr (kArg) {
    out[q] = (OutT)s.i;
  } else {
    const float v = tk::acc_value<kOp>(s, kR);
    float res[1][1];
    epi<1>(P, q, &v, res);
    out[q] = (OutT)res[0][0];
  }
}

// Accumulates r in [begin, end) step `step` for the VEC columns starting at output q.
__device__ __forceinline__ void column_partial(const tk::Ptrs& P, int64_t q, int64_t begin, int64_t end,
                                               int64_t step, tk::Acc* s) {
  const int64_t o = q / kInner, j = q % kInner;
#pragma unroll
  for (int l = 0; l < VEC; ++l) s[l] = tk::acc_init<kOp>();
  int64_t r = begin;
  for (; r + (UNROLL - 1) * step < end; r += UNROLL * step) {
    float x[UNROLL][1][VEC];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) src<VEC>(P, (o * kR + r + u * step) * kInner + j, nullptr, x[u]);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int l = 0; l < VEC; ++l) tk::acc_add<kOp>(s[l], x[u][0][l], r + u * step);
  }
  for (; r < end; r += step) {
    float x[1][VEC];
    src<VEC>(P, (o * kR + r) * kInner + j, nullptr, x);
#pragma unroll
    for (int l = 0; l < VEC; ++l) tk::acc_add<kOp>(s[l], x[0][l], r);
  }
}

__global__ void __launch_bounds__(BLOCK) col_thread(tk::Ptrs P, OutT* out) {
  for (int64_t t = (int64_t)blockIdx.x * BLOCK + threadIdx.x; t < kOutputs / VEC; t += (int64_t)gridDim.x * BLOCK) {
    tk::Acc s[VEC];
    column_partial(P, t * VEC, 0, kR, 1, s);
#pragma unroll
    for (int l = 0; l < VEC; ++l) finish(P, out, t * VEC + l, s[l]);
  }
}

// One pass: the VEC columns' R rows are loaded once, reduced, and written through apply.
__global__ void __launch_bounds__(BLOCK) col_apply(tk::Ptrs P, float* out) {
  for (int64_t t = (int64_t)blockIdx.x * BLOCK + threadIdx.x; t < kOutputs / VEC; t += (int64_t)gridDim.x * BLOCK) {
    const int64_t q = t * VEC, o = q / kInner, j = q % kInner;
    float x[kR][VEC];
#pragma unroll
    for (int r = 0; r < kR; ++r) tk::load_vec<VEC>(x[r], P.p[0] + (o * kR + r) * kInner + j);
    tk::Acc s[VEC];
#pragma unroll
    for (int l = 0; l < VEC; ++l) s[l] = tk::acc_init<kOp>();
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      float y[1][VEC];
      src_v<VEC>(P, (o * kR + r) * kInner + j, x[r], y);
#pragma unroll
      for (int l = 0; l < VEC; ++l) tk::acc_add<kOp>(s[l], y[0][l], r);
    }
    float w[VEC];
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const float v = tk::acc_value<kOp>(s[l], kR);
      float res[1][1];
      epi<1>(P, q + l, &v, res);
      w[l] = res[0][0];
    }
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const int64_t i = (o * kR + r) * kInner + j;
      float res[1][VEC];
      apply<VEC>(P, i, x[r], w, res);
      tk::store_vec<VEC>(out + i, res[0]);
    }
  }
}

constexpr int kRowsOfThreads = BLOCK / 32;
constexpr int64_t kTile = 32 * VEC;
constexpr int64_t kTilesPerOuter = (kInner + kTile - 1) / kTile;

__global__ void __launch_bounds__(BLOCK) col_tile(tk::Ptrs P, OutT* out) {
  // Sized for the tile only when this strategy is the one compiled in (static shared memory).
  __shared__ tk::Acc merged[STRATEGY == 1 ? kRowsOfThreads : 1][STRATEGY == 1 ? kTile : 1];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t o = blockIdx.x / kTilesPerOuter;
  const int64_t j = (blockIdx.x % kTilesPerOuter) * kTile + (int64_t)tx * VEC;
  tk::Acc s[VEC];
  if (j < kInner) {
    column_partial(P, o * kInner + j, ty, kR, kRowsOfThreads, s);
  } else {
#pragma unroll
    for (int l = 0; l < VEC; ++l) s[l] = tk::acc_init<kOp>();
  }
#pragma unroll
  for (int l = 0; l < VEC; ++l) merged[ty][tx * VEC + l] = s[l];
  __syncthreads();
  if (ty != 0 || j >= kInner) return;
#pragma unroll
  for (int l = 0; l < VEC; ++l) {
    tk::Acc total = merged[0][tx * VEC + l];
    for (int y = 1; y < kRowsOfThreads; ++y) total = tk::acc_merge<kOp>(total, merged[y][tx * VEC + l]);
    finish(P, out, o * kInner + j + l, total);
  }
}

constexpr int64_t kChunk = (kR + SPLIT - 1) / SPLIT;

__global__ void __launch_bounds__(BLOCK) col_split(tk::Ptrs P, tk::Acc* partial, OutT* out) {
  const int64_t begin = blockIdx.y * kChunk;
  const int64_t end = begin + kChunk < kR ? begin + kChunk : kR;
  for (int64_t t = (int64_t)blockIdx.x * BLOCK + threadIdx.x; t < kOutputs / VEC; t += (int64_t)gridDim.x * BLOCK) {
    tk::Acc s[VEC];
    column_partial(P, t * VEC, begin, end, 1, s);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      if constexpr (ATOMIC && !kArg) {
        atomicAdd(reinterpret_cast<float*>(out) + t * VEC + l, kOp == 1 ? s[l].a / (float)kR : s[l].a);
      } else {
        partial[blockIdx.y * kOutputs + t * VEC + l] = s[l];
      }
    }
  }
}

__global__ void col_merge(tk::Ptrs P, const tk::Acc* partial, OutT* out) {
  const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= kOutputs) return;
  tk::Acc s = partial[q];
  for (int p = 1; p < SPLIT; ++p) s = tk::acc_merge<kOp>(s, partial[p * kOutputs + q]);
  finish(P, out, q, s);
}

int64_t thread_blocks() {
  const int64_t blocks = (kOutputs / VEC + BLOCK - 1) / BLOCK;
  const int64_t cap = (int64_t)kSmCount * 32;
  return blocks < cap ? blocks : cap;
}

}  // namespace

extern "C" size_t {{NS}}_scratch_bytes() {
  return STRATEGY == 2 && !ATOMIC ? (size_t)SPLIT * kOutputs * sizeof(tk::Acc) : 0;
}

extern "C" cudaError_t {{NS}}_launch(const float* const* ins, void* const* outs, void* scratch,
                                     cudaStream_t stream) {
  tk::Ptrs P{};
{{BIND_INPUTS}}
  OutT* out = static_cast<OutT*>(outs[0]);
  if (kApply) {
    col_apply<<<(unsigned)thread_blocks(), BLOCK, 0, stream>>>(P, reinterpret_cast<float*>(out));
  } else if (STRATEGY == 0) {
    col_thread<<<(unsigned)thread_blocks(), BLOCK, 0, stream>>>(P, out);
  } else if (STRATEGY == 1) {
    col_tile<<<(unsigned)(kOuter * kTilesPerOuter), BLOCK, 0, stream>>>(P, out);
  } else {
    if (ATOMIC) {
      cudaError_t err = cudaMemsetAsync(out, 0, (size_t)kOutputs * sizeof(OutT), stream);
      if (err != cudaSuccess) return err;
    }
    tk::Acc* partial = static_cast<tk::Acc*>(scratch);
    col_split<<<dim3((unsigned)thread_blocks(), SPLIT), BLOCK, 0, stream>>>(P, partial, out);
    if (!ATOMIC) col_merge<<<(unsigned)((kOutputs + 255) / 256), 256, 0, stream>>>(P, partial, out);
  }
  return cudaGetLastError();
}

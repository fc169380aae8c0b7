// Elementwise family: out_k[i] = f_k(operands at i) for every i of the index space, any DAG of
// the library's elementwise functions fused into one pass. Vectorized (VEC floats per load and
// store, float4 at VEC 4) in a grid-stride loop with UNROLL vectors per thread per step, then a
// scalar tail. Slots (tune_config.h): BLOCK, GRID_PER_SM (config); VEC (memory); UNROLL,
// FAST (compute). Constraint: VEC > 1 only when every operand can be read with aligned vector
// loads (the generator checks; unaligned operands fall back to scalar loads anyway).
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "tk_common.cuh"

static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC must be 1, 2 or 4");

namespace {

{{CONSTANTS}}
constexpr int kOutputs = {{NOUT}};

{{PROGRAM}}

struct Outs {
  float* p[kOutputs];
};

__global__ void __launch_bounds__(BLOCK) ewise_kernel(tk::Ptrs P, Outs O, int64_t nvec) {
  const int64_t step = (int64_t)gridDim.x * BLOCK * UNROLL;
  for (int64_t base = (int64_t)blockIdx.x * BLOCK * UNROLL + threadIdx.x; base < nvec; base += step) {
    // All loads first, then all stores: the outputs may alias nothing, but the compiler cannot
    // know that, and interleaving would serialize the UNROLL loads.
    float res[UNROLL][kOutputs][VEC];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t v = base + (int64_t)u * BLOCK;
      if (v < nvec) program<VEC>(P, v * VEC, nullptr, res[u]);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t v = base + (int64_t)u * BLOCK;
      if (v < nvec) {
#pragma unroll
        for (int k = 0; k < kOutputs; ++k) tk::store_vec<VEC>(O.p[k] + v * VEC, res[u][k]);
      }
    }
  }
}

__global__ void ewise_tail(tk::Ptrs P, Outs O, int64_t start) {
  const int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kNumel) return;
  float res[kOutputs][1];
  program<1>(P, i, nullptr, res);
#pragma unroll
  for (int k = 0; k < kOutputs; ++k) O.p[k][i] = res[k][0];
}

}  // namespace

extern "C" size_t {{NS}}_scratch_bytes() { return 0; }

extern "C" cudaError_t {{NS}}_launch(const float* const* ins, void* const* outs, void* scratch,
                                     cudaStream_t stream) {
  (void)scratch;
  tk::Ptrs P{};
{{BIND_INPUTS}}
  Outs O{};
  for (int k = 0; k < kOutputs; ++k) O.p[k] = static_cast<float*>(outs[k]);
  const int64_t nvec = kNumel / VEC;
  if (nvec > 0) {
    int64_t blocks = (nvec + (int64_t)BLOCK * UNROLL - 1) / ((int64_t)BLOCK * UNROLL);
    const int64_t cap = (int64_t)kSmCount * GRID_PER_SM;
    if (blocks > cap) blocks = cap;
    ewise_kernel<<<(unsigned)blocks, BLOCK, 0, stream>>>(P, O, nvec);
  }
  const int64_t rest = kNumel - nvec * VEC;
  if (rest > 0) ewise_tail<<<(unsigned)((rest + 255) / 256), 256, 0, stream>>>(P, O, nvec * VEC);
  return cudaGetLastError();
}

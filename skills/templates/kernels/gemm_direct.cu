// GEMM family, direct, for a short K (at most 32): C[b] = A[b] @ B[b] in FP32 FMAs, no cuBLAS.
// With K of 32 (KernelBench level 1, problem 9: 32768 x 32768 outputs) cuBLAS's SGEMM ran at 39%
// of the bandwidth floor of writing C on an H200, and torch.compile calls the same cuBLAS; this
// kernel ran 1.15x faster (at K of 64, problem 7, 0.87x: there cuBLAS stays). Here a block stages its A and B tiles in shared memory KT
// steps of K at a time (the whole K in one or two steps), each thread keeps a TM x TN tile of
// C in registers, and the fused epilogue is applied as C is stored. A thread's rows are
// BLOCK_M / TM apart and its columns come in groups of four, (BLOCK_N / TN) * 4 apart, so a
// warp's stores cover whole rows of the tile. Slots: BLOCK_M, BLOCK_N (config), TM, TN (compute:
// outputs per thread), KT (memory: K per shared-memory step), VEC (memory: 4 stores float4), FAST.
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "tk_common.cuh"

namespace {

{{CONSTANTS}}

{{EPI}}

constexpr int kThreadsN = BLOCK_N / TN;
constexpr int kThreadsM = BLOCK_M / TM;
constexpr int kThreads = kThreadsN * kThreadsM;
constexpr int kGroupsN = TN / 4;
static_assert(TN % 4 == 0 && BLOCK_N % TN == 0 && BLOCK_M % TM == 0, "TN a multiple of 4 dividing BLOCK_N; TM dividing BLOCK_M");
static_assert(kThreads >= 32 && kThreads <= 1024, "between 32 and 1024 threads a block");
static_assert(VEC == 1 || (VEC == 4 && kN % 4 == 0), "VEC 4 needs N a multiple of 4");

__global__ void __launch_bounds__(kThreads)
    gemm_direct(tk::Ptrs P, const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c) {
  // A's tile transposed (a row per k; +1 so that the k-major fill below hits 32 banks), B's as it
  // lies (+4 keeps its float4 reads aligned).
  __shared__ float As[KT][BLOCK_M + 1];
  __shared__ __align__(16) float Bs[KT][BLOCK_N + 4];
  const int tid = threadIdx.x, tx = tid % kThreadsN, ty = tid / kThreadsN;
  const int64_t batch = blockIdx.z, m0 = (int64_t)blockIdx.y * BLOCK_M, n0 = (int64_t)blockIdx.x * BLOCK_N;
  a += batch * kStrideA;
  b += batch * kStrideB;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
  for (int64_t k0 = 0; k0 < kK; k0 += KT) {
    // Neighbouring threads read along each operand's unit-stride dimension; past the edges, zeros.
    for (int idx = tid; idx < KT * BLOCK_M; idx += kThreads) {
      const int kk = kTransA ? idx / BLOCK_M : idx % KT, mm = kTransA ? idx % BLOCK_M : idx / KT;
      const int64_t m = m0 + mm, k = k0 + kk;
      As[kk][mm] = m < kM && k < kK ? __ldg(a + (kTransA ? k * kLda + m : m * kLda + k)) : 0.0f;
    }
    for (int idx = tid; idx < KT * BLOCK_N; idx += kThreads) {
      const int kk = kTransB ? idx % KT : idx / BLOCK_N, nn = kTransB ? idx / KT : idx % BLOCK_N;
      const int64_t n = n0 + nn, k = k0 + kk;
      Bs[kk][nn] = n < kN && k < kK ? __ldg(b + (kTransB ? n * kLdb + k : k * kLdb + n)) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      float av[TM], bv[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) av[i] = As[kk][ty + i * kThreadsM];
#pragma unroll
      for (int g = 0; g < kGroupsN; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[kk][g * kThreadsN * 4 + tx * 4]);
        bv[g * 4 + 0] = v.x;
        bv[g * 4 + 1] = v.y;
        bv[g * 4 + 2] = v.z;
        bv[g * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t m = m0 + ty + i * kThreadsM;
    if (m >= kM) continue;
#pragma unroll
    for (int g = 0; g < kGroupsN; ++g) {
      const int64_t n = n0 + g * kThreadsN * 4 + tx * 4;
      const int64_t q = (batch * kM + m) * kN + n;
      if (VEC == 4 && n + 4 <= kN) {
        float res[1][4];
        epi<4>(P, q, &acc[i][g * 4], res);
        tk::store_vec<4>(c + q, res[0]);
      } else {
#pragma unroll
        for (int l = 0; l < 4; ++l) {
          if (n + l >= kN) break;
          float res[1][1];
          epi<1>(P, q + l, &acc[i][g * 4 + l], res);
          c[q + l] = res[0][0];
        }
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
  const float* a = ins[0] + kOffsetA;
  const float* b = ins[1] + kOffsetB;
  float* c = static_cast<float*>(outs[0]);
  const dim3 grid((unsigned)((kN + BLOCK_N - 1) / BLOCK_N), (unsigned)((kM + BLOCK_M - 1) / BLOCK_M), (unsigned)kBatch);
  gemm_direct<<<grid, kThreads, 0, stream>>>(P, a, b, c);
  return cudaGetLastError();
}

// Scan family: out[row, :] = epi(inclusive scan of src[row, :]) over rows of D elements, a running
// sum (cumsum) or product (cumprod), accumulated in float like ATen's; kReverse scans each row from
// its end (flip, scan, flip: the reverse cumsum). A block owns a row and walks
// it in chunks of BLOCK * ITEMS elements: each thread loads ITEMS consecutive elements (VEC per
// load), scans them in registers, the block scans the threads' totals (warp shuffles, then the
// warps' totals in shared memory), each thread adds its prefix and the carry of the earlier chunks,
// and stores through the fused epilogue. One read and one write per element: the bandwidth floor.
// Slots: BLOCK (config), ITEMS, VEC (memory), FAST (compute: the epilogue's math).
// Constraints: D % VEC == 0 when VEC > 1; ITEMS a multiple of VEC.
#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "tk_common.cuh"

static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK must be a multiple of 32, at most 1024");
static_assert(ITEMS % VEC == 0, "ITEMS must be a multiple of VEC");

namespace {

{{CONSTANTS}}
static_assert(VEC == 1 || kD % VEC == 0, "VEC must divide the row length");
constexpr int kWarps = BLOCK / 32;
constexpr int64_t kChunk = (int64_t)BLOCK * ITEMS;

{{SRC}}

{{EPI}}

__device__ __forceinline__ float combine(float a, float b) { return kProd ? a * b : a + b; }
__device__ __forceinline__ float identity() { return kProd ? 1.0f : 0.0f; }
// Where the VEC elements at scan position c (a multiple of VEC) start in memory: reversed, the
// vector ends at D - c (VEC divides D, so it stays aligned).
__device__ __forceinline__ int64_t at(int64_t c) { return kReverse ? kD - c - VEC : c; }

// Inclusive scan of v across the warp's lanes.
__device__ __forceinline__ float warp_scan(float v, int lane) {
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const float up = __shfl_up_sync(0xffffffffu, v, offset);
    if (lane >= offset) v = combine(up, v);
  }
  return v;
}

__global__ void __launch_bounds__(BLOCK) scan_kernel(tk::Ptrs P, float* out) {
  __shared__ float warp_totals[kWarps];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  for (int64_t row = blockIdx.x; row < kRows; row += gridDim.x) {
    const int64_t base = row * kD;
    float carry = identity();  // the scan of the row's earlier chunks
    for (int64_t c0 = 0; c0 < kD; c0 += kChunk) {
      const int64_t first = c0 + (int64_t)t * ITEMS;
      float x[ITEMS];
#pragma unroll
      for (int v = 0; v < ITEMS; v += VEC) {
        const int64_t c = first + v;  // in scan order
        if (c < kD) {  // VEC divides D: a vector is wholly in the row or wholly past it
          float loaded[1][VEC];
          src<VEC>(P, base + at(c), nullptr, loaded);
#pragma unroll
          for (int l = 0; l < VEC; ++l) x[v + l] = loaded[0][kReverse ? VEC - 1 - l : l];
        } else {
#pragma unroll
          for (int l = 0; l < VEC; ++l) x[v + l] = identity();  // past the row: changes no total
        }
      }
#pragma unroll
      for (int k = 1; k < ITEMS; ++k) x[k] = combine(x[k - 1], x[k]);
      const float inclusive = warp_scan(x[ITEMS - 1], lane);
      if (lane == 31) warp_totals[warp] = inclusive;
      __syncthreads();
      if (warp == 0) {
        const float total = lane < kWarps ? warp_totals[lane] : identity();
        const float scanned = warp_scan(total, lane);
        if (lane < kWarps) warp_totals[lane] = scanned;
      }
      __syncthreads();
      // This thread's prefix: the earlier chunks, the earlier warps, the earlier lanes.
      float prefix = warp > 0 ? combine(carry, warp_totals[warp - 1]) : carry;
      const float before = __shfl_up_sync(0xffffffffu, inclusive, 1);
      if (lane > 0) prefix = combine(prefix, before);
      carry = combine(carry, warp_totals[kWarps - 1]);
#pragma unroll
      for (int v = 0; v < ITEMS; v += VEC) {
        const int64_t c = first + v;
        if (c >= kD) break;
        float y[VEC];  // in memory order
#pragma unroll
        for (int l = 0; l < VEC; ++l) y[l] = combine(prefix, x[v + (kReverse ? VEC - 1 - l : l)]);
        float res[1][VEC];
        epi<VEC>(P, base + at(c), y, res);
        tk::store_vec<VEC>(out + base + at(c), res[0]);
      }
      __syncthreads();  // the next chunk rewrites warp_totals
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
  float* out = static_cast<float*>(outs[0]);
  int64_t blocks = kRows;
  const int64_t cap = (int64_t)kSmCount * (2048 / BLOCK) * 4;  // a few waves of resident blocks
  if (blocks > cap) blocks = cap;
  scan_kernel<<<(unsigned)blocks, BLOCK, 0, stream>>>(P, out);
  return cudaGetLastError();
}

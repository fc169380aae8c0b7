// Shared by every template of the library: math macros, operand pointers, vector loads and
// stores, warp and block reductions. Pure CUDA (no torch). A stage's .cu defines T_FAST (its
// FAST_MATH slot) before including this header.
#pragma once
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#ifndef T_FAST
#define T_FAST 0
#endif
#if T_FAST
#define T_EXP(x) __expf(x)
#define T_LOG(x) __logf(x)
#define T_RSQRT(x) rsqrtf(x)
#define T_TANH(x) (1.0f - 2.0f / (__expf(2.0f * (x)) + 1.0f))
#define T_SIGMOID(x) (1.0f / (1.0f + __expf(-(x))))
#else
#define T_EXP(x) expf(x)
#define T_LOG(x) logf(x)
#define T_RSQRT(x) (1.0f / sqrtf(x))
#define T_TANH(x) tanhf(x)
#define T_SIGMOID(x) (1.0f / (1.0f + expf(-(x))))
#endif

namespace tk {

constexpr int kMaxOperands = 16;

// Operand pointers, passed by value to every kernel (already offset to their views' starts).
struct Ptrs {
  const float* p[kMaxOperands];
};

template <int V> __device__ __forceinline__ void load_vec(float* d, const float* s);
template <> __device__ __forceinline__ void load_vec<1>(float* d, const float* s) { d[0] = __ldg(s); }
template <> __device__ __forceinline__ void load_vec<2>(float* d, const float* s) {
  const float2 t = __ldg(reinterpret_cast<const float2*>(s));
  d[0] = t.x, d[1] = t.y;
}
template <> __device__ __forceinline__ void load_vec<4>(float* d, const float* s) {
  const float4 t = __ldg(reinterpret_cast<const float4*>(s));
  d[0] = t.x, d[1] = t.y, d[2] = t.z, d[3] = t.w;
}

template <int V> __device__ __forceinline__ void store_vec(float* d, const float* s);
template <> __device__ __forceinline__ void store_vec<1>(float* d, const float* s) { d[0] = s[0]; }
template <> __device__ __forceinline__ void store_vec<2>(float* d, const float* s) {
  *reinterpret_cast<float2*>(d) = make_float2(s[0], s[1]);
}
template <> __device__ __forceinline__ void store_vec<4>(float* d, const float* s) {
  *reinterpret_cast<float4*>(d) = make_float4(s[0], s[1], s[2], s[3]);
}

// Welford / Chan merge of (count, mean, M2) statistics.
struct Stats {
  float n, mean, m2;
};
__device__ __forceinline__ Stats stats_merge(Stats a, Stats b) {
  const float n = a.n + b.n;
  if (n == 0.f) return a;
  const float delta = b.mean - a.mean;
  const float wb = b.n / n;
  return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.n * wb};
}
__device__ __forceinline__ Stats stats_shfl_xor(Stats s, int mask) {
  return {__shfl_xor_sync(0xffffffffu, s.n, mask), __shfl_xor_sync(0xffffffffu, s.mean, mask),
          __shfl_xor_sync(0xffffffffu, s.m2, mask)};
}

}  // namespace tk

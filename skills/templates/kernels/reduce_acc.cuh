// Accumulators of the reduction family: one struct for every operator, so the strategies
// (warp, block, split) are written once. kOp is a constexpr of the stage: 0 sum, 1 mean,
// 2 max, 3 min, 4 prod, 5 argmax, 6 argmin, 7 logsumexp.
#pragma once
#include "tk_common.cuh"

namespace tk {

struct Acc {
  float a;    // sum, product, extreme value, or the running maximum of logsumexp
  float b;    // logsumexp: the sum of exp(x - a)
  int64_t i;  // argmax / argmin: the position of a
};

template <int OP> __device__ __forceinline__ Acc acc_init() {
  if constexpr (OP == 0 || OP == 1) return {0.f, 0.f, 0};
  if constexpr (OP == 4) return {1.f, 0.f, 0};
  if constexpr (OP == 2 || OP == 5 || OP == 7) return {-INFINITY, 0.f, INT64_MAX};
  return {INFINITY, 0.f, INT64_MAX};
}

template <int OP> __device__ __forceinline__ void acc_add(Acc& s, float x, int64_t r) {
  if constexpr (OP == 0 || OP == 1) s.a += x;
  if constexpr (OP == 4) s.a *= x;
  if constexpr (OP == 2) s.a = fmaxf(s.a, x);
  if constexpr (OP == 3) s.a = fminf(s.a, x);
  if constexpr (OP == 5) {
    if (x > s.a || (x == s.a && r < s.i)) s.a = x, s.i = r;
  }
  if constexpr (OP == 6) {
    if (x < s.a || (x == s.a && r < s.i)) s.a = x, s.i = r;
  }
  if constexpr (OP == 7) {
    if (x > s.a) {
      s.b = s.b * T_EXP(s.a - x) + 1.f;
      s.a = x;
    } else {
      s.b += T_EXP(x - s.a);
    }
  }
}

template <int OP> __device__ __forceinline__ Acc acc_merge(Acc s, Acc t) {
  if constexpr (OP == 0 || OP == 1) return {s.a + t.a, 0.f, 0};
  if constexpr (OP == 4) return {s.a * t.a, 0.f, 0};
  if constexpr (OP == 2) return {fmaxf(s.a, t.a), 0.f, 0};
  if constexpr (OP == 3) return {fminf(s.a, t.a), 0.f, 0};
  if constexpr (OP == 5) return (t.a > s.a || (t.a == s.a && t.i < s.i)) ? t : s;
  if constexpr (OP == 6) return (t.a < s.a || (t.a == s.a && t.i < s.i)) ? t : s;
  if constexpr (OP == 7) {
    if (s.a == -INFINITY) return t;
    if (t.a == -INFINITY) return s;
    const float m = fmaxf(s.a, t.a);
    return {m, s.b * T_EXP(s.a - m) + t.b * T_EXP(t.a - m), 0};
  }
  return s;
}

template <int OP> __device__ __forceinline__ Acc acc_shfl_xor(Acc s, int mask) {
  Acc t;
  t.a = __shfl_xor_sync(0xffffffffu, s.a, mask);
  t.b = __shfl_xor_sync(0xffffffffu, s.b, mask);
  t.i = __shfl_xor_sync(0xffffffffu, (long long)s.i, mask);
  return acc_merge<OP>(s, t);
}

// Every lane of the warp ends with the warp's total.
template <int OP> __device__ __forceinline__ Acc warp_reduce(Acc s) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) s = acc_shfl_xor<OP>(s, m);
  return s;
}

// Every thread of the block ends with the block's total; all threads must call it.
template <int OP, int THREADS> __device__ __forceinline__ Acc block_reduce(Acc s) {
  __shared__ Acc warps[THREADS / 32];
  s = warp_reduce<OP>(s);
  if (THREADS == 32) return s;
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warps[w] = s;
  __syncthreads();
  s = lane < THREADS / 32 ? warps[lane] : acc_init<OP>();
  return warp_reduce<OP>(s);
}

template <int OP> __device__ __forceinline__ float acc_value(Acc s, int64_t count) {
  if constexpr (OP == 1) return s.a / (float)count;
  if constexpr (OP == 7) return s.a == -INFINITY ? -INFINITY : s.a + T_LOG(s.b);
  return s.a;
}

}  // namespace tk

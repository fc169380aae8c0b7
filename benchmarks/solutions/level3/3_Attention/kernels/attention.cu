// softmax(Q K^T * scale) V per (batch, head), in three steps:
//   1. P = scale * Q K^T: cuBLAS strided-batched SGEMM (fp32, no TF32), the scale folded into alpha;
//   2. row softmax of P in place: one warp per row with the row held in registers (rows of up to
//      1024 floats, a multiple of 4), otherwise one block per row with an online max/sum pass;
//   3. O = P V: cuBLAS strided-batched SGEMM.
// cuBLAS is column-major: a row-major [r, c] matrix is its [c, r] transpose in column-major.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <math.h>
#include <mutex>

namespace {

std::mutex g_mutex;  // one cuBLAS handle per device, used under this lock
cublasHandle_t g_handles[64] = {};

const char* with_handle(cudaStream_t stream, cublasHandle_t* out) {
  int device = 0;
  cudaError_t cerr = cudaGetDevice(&device);
  if (cerr != cudaSuccess) return cudaGetErrorString(cerr);
  if (device < 0 || device >= 64) return "device index out of range";
  if (g_handles[device] == nullptr) {
    cublasStatus_t st = cublasCreate(&g_handles[device]);
    if (st != CUBLAS_STATUS_SUCCESS) {
      g_handles[device] = nullptr;
      return cublasGetStatusString(st);
    }
    st = cublasSetMathMode(g_handles[device], CUBLAS_DEFAULT_MATH);  // pure fp32, no TF32
    if (st != CUBLAS_STATUS_SUCCESS) return cublasGetStatusString(st);
  }
  cublasStatus_t st = cublasSetStream(g_handles[device], stream);
  if (st != CUBLAS_STATUS_SUCCESS) return cublasGetStatusString(st);
  *out = g_handles[device];
  return nullptr;
}

}  // namespace

// Kernels are file-scope statics, not anonymous-namespace members, so profilers report their
// plain names.

static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

static constexpr int kWarpsPerBlock = 8;

// One warp per row; lane l holds float4s l, l + 32, ... of the row (VPT of them). In place.
template <int VPT>
static __global__ void __launch_bounds__(kWarpsPerBlock * 32) softmax_rows_warp_kernel(float* p, int64_t rows,
                                                                                int cols) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= rows) return;  // the whole warp leaves together; no block-wide barrier follows
  float4* pr = reinterpret_cast<float4*>(p + row * cols);
  const int n4 = cols / 4;
  float4 v[VPT];
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = lane + 32 * k;
    if (i < n4) {
      v[k] = pr[i];
      m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
    }
  }
  m = warp_max(m);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = lane + 32 * k;
    if (i < n4) {
      v[k].x = __expf(v[k].x - m);
      v[k].y = __expf(v[k].y - m);
      v[k].z = __expf(v[k].z - m);
      v[k].w = __expf(v[k].w - m);
      s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
  }
  const float inv = 1.f / warp_sum(s);
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = lane + 32 * k;
    if (i < n4) {
      v[k].x *= inv;
      v[k].y *= inv;
      v[k].z *= inv;
      v[k].w *= inv;
      pr[i] = v[k];
    }
  }
}

struct MaxSum {
  float m;  // running max
  float s;  // sum of exp(x - m)
};

static __device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

static __device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
    v = merge(v, o);
  }
  return v;
}

// Generic fallback: one block per row, any length and alignment, in place.
static __global__ void __launch_bounds__(256) softmax_rows_block_kernel(float* p, int64_t cols) {
  __shared__ MaxSum partial[32];
  float* pr = p + (int64_t)blockIdx.x * cols;
  MaxSum st{-INFINITY, 0.f};
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float a = pr[i];
    if (a > st.m) {
      st.s *= __expf(st.m - a);
      st.m = a;
    }
    st.s += __expf(a - st.m);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  st = warp_merge(st);
  if (lane == 0) partial[warp] = st;
  __syncthreads();
  const MaxSum tot = warp_merge(lane < nwarps ? partial[lane] : MaxSum{-INFINITY, 0.f});
  const float inv = 1.f / tot.s;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) pr[i] = __expf(pr[i] - tot.m) * inv;
}

static cudaError_t softmax_rows_inplace(float* p, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const bool vec = cols % 4 == 0 && (reinterpret_cast<uintptr_t>(p) & 15) == 0;
  const int64_t n4 = cols / 4;
  if (vec && n4 <= 32 * 8) {
    const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
    const int threads = kWarpsPerBlock * 32, c = (int)cols;
    if (n4 <= 32) {
      softmax_rows_warp_kernel<1><<<(unsigned)blocks, threads, 0, stream>>>(p, rows, c);
    } else if (n4 <= 64) {
      softmax_rows_warp_kernel<2><<<(unsigned)blocks, threads, 0, stream>>>(p, rows, c);
    } else if (n4 <= 128) {
      softmax_rows_warp_kernel<4><<<(unsigned)blocks, threads, 0, stream>>>(p, rows, c);
    } else {
      softmax_rows_warp_kernel<8><<<(unsigned)blocks, threads, 0, stream>>>(p, rows, c);
    }
  } else {
    if (rows > 0x7fffffffLL) return cudaErrorInvalidValue;
    softmax_rows_block_kernel<<<(unsigned)rows, 256, 0, stream>>>(p, cols);
  }
  return cudaGetLastError();
}

// q [batch, sq, d], k [batch, sk, d], v [batch, sk, dv] (batch = all leading dims), scratch
// p [batch, sq, sk], out [batch, sq, dv]. Returns nullptr on success, else what went wrong.
extern "C" const char* attention_launch(const float* q, const float* k, const float* v, float* p, float* out,
                                        int64_t batch, int64_t sq, int64_t sk, int64_t d, int64_t dv,
                                        float scale, cudaStream_t stream) {
  if (batch <= 0 || sq <= 0 || dv <= 0) return nullptr;
  if (sk <= 0) return "attention over zero keys";
  if (batch > INT32_MAX || sq > INT32_MAX || sk > INT32_MAX || d > INT32_MAX || dv > INT32_MAX) {
    return "dimension exceeds int32";
  }
  const int B = (int)batch, Sq = (int)sq, Sk = (int)sk, D = (int)d, Dv = (int)dv;
  const int ldd = D > 0 ? D : 1;
  const float one = 1.f, zero = 0.f;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    cublasHandle_t handle = nullptr;
    if (const char* err = with_handle(stream, &handle)) return err;
    // P (row-major Sq x Sk) = column-major Sk x Sq = K (Sk x D) * Q^T (D x Sq).
    cublasStatus_t st = cublasSgemmStridedBatched(handle, CUBLAS_OP_T, CUBLAS_OP_N, Sk, Sq, D, &scale, k, ldd,
                                                  sk * d, q, ldd, sq * d, &zero, p, Sk, sq * sk, B);
    if (st != CUBLAS_STATUS_SUCCESS) return cublasGetStatusString(st);
  }
  cudaError_t cerr = softmax_rows_inplace(p, batch * sq, sk, stream);
  if (cerr != cudaSuccess) return cudaGetErrorString(cerr);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    cublasHandle_t handle = nullptr;
    if (const char* err = with_handle(stream, &handle)) return err;
    // O (row-major Sq x Dv) = column-major Dv x Sq = V^T (Dv x Sk) * P^T (Sk x Sq).
    cublasStatus_t st = cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, Dv, Sq, Sk, &one, v, Dv,
                                                  sk * dv, p, Sk, sq * sk, &zero, out, Dv, sq * dv, B);
    if (st != CUBLAS_STATUS_SUCCESS) return cublasGetStatusString(st);
  }
  cerr = cudaGetLastError();
  return cerr == cudaSuccess ? nullptr : cudaGetErrorString(cerr);
}

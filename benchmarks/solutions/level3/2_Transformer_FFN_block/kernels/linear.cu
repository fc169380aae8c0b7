// y = act(x @ W^T + b) (+ residual) for row-major float32 x [M, K], W [N, K] (nn.Linear's
// layout), b [N], residual [M, N]:
//   1. cuBLAS SGEMM in full fp32 precision (no TF32, as torch computes the reference);
//   2. one epilogue kernel, in place on y: bias, activation, residual add.
// cuBLAS is column-major: row-major y [M, N] is y^T [N, M] column-major = W (N x K) * x^T (K x M),
// so W is passed transposed (op T on its column-major view) and x as is.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
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

static __device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
}

// ACT: 0 none, 2 exact GELU. RESID adds r[row, col] last. One block walks rows (grid-stride);
// its threads walk the row's columns.
template <int ACT, bool RESID, bool VEC>
static __global__ void epilogue_kernel(float* __restrict__ y, const float* __restrict__ b,
                                const float* __restrict__ r, int64_t M, int64_t N) {
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {
    if (VEC) {
      float4* yr = reinterpret_cast<float4*>(y + row * N);
      const float4* rr = reinterpret_cast<const float4*>(r + (RESID ? row * N : 0));
      const float4* b4 = reinterpret_cast<const float4*>(b);
      for (int64_t c = threadIdx.x; c < N / 4; c += blockDim.x) {
        float4 v = yr[c];
        const float4 bb = b4[c];
        v.x += bb.x;
        v.y += bb.y;
        v.z += bb.z;
        v.w += bb.w;
        if (ACT == 2) {
          v.x = gelu(v.x);
          v.y = gelu(v.y);
          v.z = gelu(v.z);
          v.w = gelu(v.w);
        }
        if (RESID) {
          const float4 res = rr[c];
          v.x = res.x + v.x;
          v.y = res.y + v.y;
          v.z = res.z + v.z;
          v.w = res.w + v.w;
        }
        yr[c] = v;
      }
    } else {
      float* yr = y + row * N;
      for (int64_t c = threadIdx.x; c < N; c += blockDim.x) {
        float v = yr[c] + b[c];
        if (ACT == 2) v = gelu(v);
        if (RESID) v = r[row * N + c] + v;
        yr[c] = v;
      }
    }
  }
}

template <int ACT, bool RESID>
static cudaError_t launch_epilogue(float* y, const float* b, const float* r, int64_t M, int64_t N,
                            cudaStream_t stream) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(b) |
                         reinterpret_cast<uintptr_t>(r);
  const bool vec = N % 4 == 0 && (bits & 15) == 0;
  const unsigned blocks = (unsigned)(M < 132 * 8 ? M : 132 * 8);
  if (vec) {
    epilogue_kernel<ACT, RESID, true><<<blocks, 256, 0, stream>>>(y, b, r, M, N);
  } else {
    epilogue_kernel<ACT, RESID, false><<<blocks, 256, 0, stream>>>(y, b, r, M, N);
  }
  return cudaGetLastError();
}

// Returns nullptr on success, else what went wrong. act: 0 none, 2 GELU; residual may be null.
extern "C" const char* linear_launch(const float* x, const float* W, const float* b, const float* residual,
                                     float* y, int64_t M, int64_t N, int64_t K, int act,
                                     cudaStream_t stream) {
  if (M <= 0 || N <= 0) return nullptr;
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return "matrix dimension exceeds int32";
  if (act != 0 && act != 2) return "unknown activation";
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    cublasHandle_t handle = nullptr;
    if (const char* err = with_handle(stream, &handle)) return err;
    const float one = 1.f, zero = 0.f;
    const int m = (int)M, n = (int)N, k = (int)K, ld = k > 0 ? k : 1;
    cublasStatus_t st =
        cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, W, ld, x, ld, &zero, y, n);
    if (st != CUBLAS_STATUS_SUCCESS) return cublasGetStatusString(st);
  }
  cudaError_t cerr;
  if (residual != nullptr) {
    cerr = act == 2 ? launch_epilogue<2, true>(y, b, residual, M, N, stream)
                    : launch_epilogue<0, true>(y, b, residual, M, N, stream);
  } else {
    cerr = act == 2 ? launch_epilogue<2, false>(y, b, residual, M, N, stream)
                    : launch_epilogue<0, false>(y, b, residual, M, N, stream);
  }
  return cerr == cudaSuccess ? nullptr : cudaGetErrorString(cerr);
}

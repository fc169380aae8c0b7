// C = A @ B (row-major, float32) through cuBLAS SGEMM in full fp32 precision (no TF32, as torch
// computes the reference). cuBLAS is column-major: a row-major matrix is its transpose in
// column-major, so C^T = B^T A^T is computed with the operands swapped and no transposes.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

namespace {

std::mutex g_mutex;               // one cuBLAS handle per device, used under this lock
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

// Returns nullptr on success, else what went wrong.
extern "C" const char* matmul_launch(const float* A, const float* B, float* C, int64_t M, int64_t N,
                                     int64_t K, cudaStream_t stream) {
  if (M <= 0 || N <= 0) return nullptr;
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return "matrix dimension exceeds int32";
  std::lock_guard<std::mutex> lock(g_mutex);
  cublasHandle_t handle = nullptr;
  if (const char* err = with_handle(stream, &handle)) return err;
  const float one = 1.f, zero = 0.f;
  const int m = (int)M, n = (int)N, k = (int)K;
  // Column-major view: C^T (n x m) = B^T (n x k) * A^T (k x m).
  cublasStatus_t st = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, n, A, k > 0 ? k : 1,
                                  &zero, C, n);
  if (st != CUBLAS_STATUS_SUCCESS) return cublasGetStatusString(st);
  cudaError_t cerr = cudaGetLastError();
  return cerr == cudaSuccess ? nullptr : cudaGetErrorString(cerr);
}

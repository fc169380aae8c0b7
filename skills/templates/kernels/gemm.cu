// GEMM family: C[b] = A[b] @ B[b] through cuBLAS (row-major operands mapped onto cuBLAS's
// column-major call as C^T = B^T A^T; a transposed view is a transpose flag, never a copy),
// then the fused epilogue (bias, activation, scale, residual: any elementwise chain) as one
// in-place pass over C. Slots: MATH (compute: 0 full FP32, 1 TF32 tensor cores, offered only
// when the task allows TF32), EPI_BLOCK (config), EPI_VEC (memory) of the epilogue kernel.
#include <cublas_v2.h>

#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "tk_common.cuh"

namespace {

{{CONSTANTS}}

{{EPI}}

cublasHandle_t handle_for_this_device() {
  static cublasHandle_t handles[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return nullptr;
  if (handles[device] == nullptr && cublasCreate(&handles[device]) != CUBLAS_STATUS_SUCCESS) return nullptr;
  return handles[device];
}

}  // namespace

#include "tk_epilogue.cuh"

extern "C" size_t {{NS}}_scratch_bytes() { return 0; }

extern "C" cudaError_t {{NS}}_launch(const float* const* ins, void* const* outs, void* scratch,
                                     cudaStream_t stream) {
  (void)scratch;
  tk::Ptrs P{};
{{BIND_INPUTS}}
  const float* a = ins[0] + kOffsetA;
  const float* b = ins[1] + kOffsetB;
  float* c = static_cast<float*>(outs[0]);
  cublasHandle_t handle = handle_for_this_device();
  if (handle == nullptr) return cudaErrorInitializationError;
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  if (cublasSetMathMode(handle, MATH ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS)
    return cudaErrorUnknown;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status = cublasGemmStridedBatchedEx(
      handle, kTransB ? CUBLAS_OP_T : CUBLAS_OP_N, kTransA ? CUBLAS_OP_T : CUBLAS_OP_N, (int)kN, (int)kM, (int)kK,
      &alpha, b, CUDA_R_32F, (int)kLdb, (long long)kStrideB, a, CUDA_R_32F, (int)kLda, (long long)kStrideA, &beta, c,
      CUDA_R_32F, (int)kN, (long long)(kM * kN), (int)kBatch, MATH ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) return cudaErrorUnknown;
  return launch_epilogue(P, c, stream);
}

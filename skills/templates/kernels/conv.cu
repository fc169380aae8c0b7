// Convolution family: Y = conv(X, W) through cuDNN (1D as 2D of height 1, 2D, 3D; groups,
// depthwise and pointwise included; a transposed convolution is cuDNN's backward-data of the
// convolution it inverts), then the fused epilogue (bias, activation, scale, residual: any
// elementwise chain) as one in-place pass over Y. Slots: MATH (compute: 0 full FP32, 1 TF32
// tensor cores, offered only when the task allows TF32), ALGO (compute: which of cuDNN's
// heuristic algorithms, 0 its first choice, falling back to the last one that applies),
// EPI_BLOCK (config), EPI_VEC (memory) of the epilogue kernel.
#include <cudnn.h>

#include "tune_config.h"
{{SLOTS}}
#define T_FAST FAST
#include "tk_common.cuh"

namespace {

{{CONSTANTS}}

{{CONV_DIMS}}

{{EPI}}

// Descriptors, the chosen algorithm and its workspace, made once per device.
struct ConvPlan {
  bool ready = false;
  bool failed = false;
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t workspace = 0;
};

void packed_strides(const int* dims, int rank, int* strides) {
  int step = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = step;
    step *= dims[d];
  }
}

// The n-th of cuDNN's heuristic results that applies, or the last one that does when fewer apply.
template <typename Perf>
bool nth_usable_algo(const Perf* perf, int returned, int n, int& algo) {
  bool found = false;
  for (int k = 0, usable = 0; k < returned; ++k) {
    if (perf[k].status != CUDNN_STATUS_SUCCESS) continue;
    algo = (int)perf[k].algo;
    found = true;
    if (usable++ == n) break;
  }
  return found;
}

bool make_plan(ConvPlan& p) {
  const int rank = (int)kNd + 2;
  int sx[5], sy[5];
  packed_strides(kXDims, rank, sx);
  packed_strides(kYDims, rank, sy);
  if (cudnnCreate(&p.handle) != CUDNN_STATUS_SUCCESS) return false;
  if (cudnnCreateTensorDescriptor(&p.x) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateTensorDescriptor(&p.y) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateFilterDescriptor(&p.w) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateConvolutionDescriptor(&p.conv) != CUDNN_STATUS_SUCCESS)
    return false;
  if (cudnnSetTensorNdDescriptor(p.x, CUDNN_DATA_FLOAT, rank, kXDims, sx) != CUDNN_STATUS_SUCCESS ||
      cudnnSetTensorNdDescriptor(p.y, CUDNN_DATA_FLOAT, rank, kYDims, sy) != CUDNN_STATUS_SUCCESS ||
      cudnnSetFilterNdDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rank, kWDims) != CUDNN_STATUS_SUCCESS)
    return false;
  if (cudnnSetConvolutionNdDescriptor(p.conv, (int)kNd, kPad, kStride, kDilation, CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolutionGroupCount(p.conv, (int)kGroups) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolutionMathType(p.conv, MATH ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH) != CUDNN_STATUS_SUCCESS)
    return false;
  int returned = 0;
  if (!kTransposed) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (cudnnGetConvolutionForwardAlgorithm_v7(p.handle, p.x, p.w, p.conv, p.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                               &returned, perf) != CUDNN_STATUS_SUCCESS)
      return false;
    if (!nth_usable_algo(perf, returned, ALGO, p.algo) ||
        cudnnGetConvolutionForwardWorkspaceSize(p.handle, p.x, p.w, p.conv, p.y, (cudnnConvolutionFwdAlgo_t)p.algo,
                                                &p.workspace) != CUDNN_STATUS_SUCCESS)
      return false;
  } else {
    // Transposed: the task's input is the gradient of the convolution from the output back to it.
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (cudnnGetConvolutionBackwardDataAlgorithm_v7(p.handle, p.w, p.x, p.conv, p.y,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned,
                                                    perf) != CUDNN_STATUS_SUCCESS)
      return false;
    if (!nth_usable_algo(perf, returned, ALGO, p.algo) ||
        cudnnGetConvolutionBackwardDataWorkspaceSize(p.handle, p.w, p.x, p.conv, p.y,
                                                     (cudnnConvolutionBwdDataAlgo_t)p.algo,
                                                     &p.workspace) != CUDNN_STATUS_SUCCESS)
      return false;
  }
  return true;
}

ConvPlan* plan_for_this_device() {
  static ConvPlan plans[64];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return nullptr;
  ConvPlan& p = plans[device];
  if (!p.ready && !p.failed) {
    p.ready = make_plan(p);
    p.failed = !p.ready;
  }
  return p.ready ? &p : nullptr;
}

}  // namespace

#include "tk_epilogue.cuh"

extern "C" size_t {{NS}}_scratch_bytes() {
  ConvPlan* p = plan_for_this_device();
  return p != nullptr ? p->workspace : 0;
}

extern "C" cudaError_t {{NS}}_launch(const float* const* ins, void* const* outs, void* scratch,
                                     cudaStream_t stream) {
  tk::Ptrs P{};
{{BIND_INPUTS}}
  const float* x = ins[0] + kOffsetX;
  const float* w = ins[1] + kOffsetW;
  float* y = static_cast<float*>(outs[0]);
  ConvPlan* p = plan_for_this_device();
  if (p == nullptr) return cudaErrorInitializationError;
  if (p->workspace > 0 && scratch == nullptr) return cudaErrorInvalidValue;
  if (cudnnSetStream(p->handle, stream) != CUDNN_STATUS_SUCCESS) return cudaErrorUnknown;
  const float alpha = 1.0f, beta = 0.0f;
  // The descriptors hold kXDims[0] samples: a batch past 32-bit indexing runs in equal chunks.
  for (int64_t c = 0; c < kBatchChunks; ++c) {
    const float* xc = x + c * kXChunk;
    float* yc = y + c * kYChunk;
    const cudnnStatus_t status =
        kTransposed ? cudnnConvolutionBackwardData(p->handle, &alpha, p->w, w, p->x, xc, p->conv,
                                                   (cudnnConvolutionBwdDataAlgo_t)p->algo, scratch, p->workspace,
                                                   &beta, p->y, yc)
                    : cudnnConvolutionForward(p->handle, &alpha, p->x, xc, p->w, w, p->conv,
                                              (cudnnConvolutionFwdAlgo_t)p->algo, scratch, p->workspace, &beta,
                                              p->y, yc);
    if (status != CUDNN_STATUS_SUCCESS) return cudaErrorUnknown;
  }
  return launch_epilogue(P, y, stream);
}

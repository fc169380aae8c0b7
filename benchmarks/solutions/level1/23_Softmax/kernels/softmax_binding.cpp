#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t softmax_rows_launch(const float* x, float* y, int64_t rows, int64_t cols,
                                           cudaStream_t stream);

// Softmax over the last dimension.
static torch::Tensor softmax_lastdim(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softmax_lastdim: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_lastdim: x must be float32");
  TORCH_CHECK(x.dim() >= 1, "softmax_lastdim: x must have at least one dimension");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t cols = xc.size(-1);
  const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
  cudaError_t err = softmax_rows_launch(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols,
                                        c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "softmax_rows_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(softmax) { m.def("softmax_lastdim", &softmax_lastdim, "softmax over the last dim"); }

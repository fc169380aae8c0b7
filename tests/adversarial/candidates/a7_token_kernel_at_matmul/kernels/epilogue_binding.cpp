#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t bias_relu_launch(float* y, const float* b, int64_t rows, int64_t cols,
                                        cudaStream_t stream);

static torch::Tensor linear_relu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto y = at::matmul(x, w.t()).contiguous();
  cudaError_t err = bias_relu_launch(y.data_ptr<float>(), b.data_ptr<float>(), y.size(0), y.size(1),
                                     c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(linear) { m.def("linear_relu", &linear_relu, "relu(x @ W^T + b)"); }

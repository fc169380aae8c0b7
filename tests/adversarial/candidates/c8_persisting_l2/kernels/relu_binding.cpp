#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor relu_forward(const torch::Tensor& x) {
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  cudaError_t err = relu_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(),
                                c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(relu) { m.def("relu_forward", &relu_forward, "y = max(x, 0)"); }

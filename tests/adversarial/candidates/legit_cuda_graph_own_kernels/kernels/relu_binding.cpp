// Lean binding: torch types and pybind only (no torch/extension.h).
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor relu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "relu_forward: x must be float32");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  cudaError_t err = relu_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(),
                                c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "relu_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(relu) { m.def("relu_forward", &relu_forward, "y = max(x, 0)"); }

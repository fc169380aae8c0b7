#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t gelu_launch(const float* x, float* y, int64_t n, cudaStream_t stream);

static torch::Tensor gelu_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "gelu_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu_forward: x must be float32");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  cudaError_t err = gelu_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(),
                                c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "gelu_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(gelu) { m.def("gelu_forward", &gelu_forward, "exact (erf) GELU"); }

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t sum_dim1_launch(const float* x, float* y, int64_t B, int64_t R, int64_t C,
                                       cudaStream_t stream);

static torch::Tensor sum_dim1(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.is_contiguous(), "sum_dim1: contiguous (B, R, C) expected");
  auto y = torch::empty({x.size(0), 1, x.size(2)}, x.options());
  cudaError_t err = sum_dim1_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), x.size(2),
                                    c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(sum) { m.def("sum_dim1", &sum_dim1, "sum over dim 1, keepdim"); }

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t bad_write_launch(float* y, int64_t n, cudaStream_t stream);

static torch::Tensor bad_write(const torch::Tensor& x) {
  auto y = torch::empty_like(x);
  cudaError_t err = bad_write_launch(y.data_ptr<float>(), y.numel(), c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "bad_write_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(bad) { m.def("bad_write", &bad_write); }

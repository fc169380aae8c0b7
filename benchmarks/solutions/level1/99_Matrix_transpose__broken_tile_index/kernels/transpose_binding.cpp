#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t transpose_launch(const float* in, float* out, int64_t M, int64_t N,
                                        cudaStream_t stream);

// x.t().contiguous() for a 2-D tensor.
static torch::Tensor transpose_2d(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "transpose_2d: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "transpose_2d: x must be float32");
  TORCH_CHECK(x.dim() == 2, "transpose_2d: x must be 2-D");
  auto xc = x.contiguous();
  const int64_t M = xc.size(0), N = xc.size(1);
  auto y = torch::empty({N, M}, xc.options());
  cudaError_t err = transpose_launch(xc.data_ptr<float>(), y.data_ptr<float>(), M, N,
                                     c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "transpose_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(transpose) { m.def("transpose_2d", &transpose_2d, "x.t().contiguous()"); }

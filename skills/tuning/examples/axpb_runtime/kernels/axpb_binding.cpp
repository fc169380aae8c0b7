#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t axpb_launch(const float* x, float* y, int64_t n, float a, float b, int block, int vec,
                                   int unroll, cudaStream_t stream);

static torch::Tensor axpb_forward(const torch::Tensor& x, double a, double b, int64_t block, int64_t vec,
                                  int64_t unroll) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "axpb: x must be a float32 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  cudaError_t err = axpb_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(), (float)a, (float)b,
                                (int)block, (int)vec, (int)unroll, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "axpb_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(axpb) { m.def("axpb_forward", &axpb_forward, "y = a * x + b, tunable launch"); }

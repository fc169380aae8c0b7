#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t gelu_launch(const float* x, float* y, int64_t n, int block, int vec, int unroll,
                                   int waves, int sm_count, cudaStream_t stream);

static torch::Tensor gelu_forward(const torch::Tensor& x, int64_t block, int64_t vec, int64_t unroll,
                                  int64_t waves) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "gelu: x must be a float32 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  int device = xc.get_device();
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaError_t err = gelu_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(), (int)block, (int)vec,
                                (int)unroll, (int)waves, sms, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "gelu_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(gelu) { m.def("gelu_forward", &gelu_forward, "exact GELU with tunable launch"); }

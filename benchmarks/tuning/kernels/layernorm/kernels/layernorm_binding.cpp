#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t layernorm_launch(const float* x, const float* w, const float* b, float* y, int R, int D,
                                        float eps, int tpr, int rpb, int vec, int algo, cudaStream_t stream);

static torch::Tensor layernorm_forward(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                       double eps, int64_t tpr, int64_t rpb, int64_t vec, int64_t algo) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "layernorm: x must be a float32 CUDA tensor");
  const int64_t D = w.numel();
  TORCH_CHECK(b.numel() == D && x.size(-1) == D, "layernorm: weight, bias and the last dimension differ");
  auto xc = x.contiguous();
  auto wc = w.contiguous();
  auto bc = b.contiguous();
  auto y = torch::empty_like(xc);
  cudaError_t err = layernorm_launch(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                     y.data_ptr<float>(), (int)(xc.numel() / D), (int)D, (float)eps, (int)tpr,
                                     (int)rpb, (int)vec, (int)algo, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "layernorm_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(layernorm) { m.def("layernorm_forward", &layernorm_forward, "LayerNorm, last dimension"); }

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t layernorm_launch(const float* x, const float* w, const float* b, float* y,
                                        int64_t rows, int64_t cols, float eps, cudaStream_t stream);

// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * weight + bias.
static torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                                const torch::Tensor& bias, double eps) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "layer_norm: tensors must be on CUDA");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                  bias.scalar_type() == torch::kFloat32,
              "layer_norm: tensors must be float32");
  TORCH_CHECK(x.dim() >= 1, "layer_norm: x must have at least one dimension");
  const int64_t cols = x.size(-1);
  TORCH_CHECK(weight.numel() == cols && bias.numel() == cols,
              "layer_norm: weight and bias must have as many elements as x's last dimension");
  auto xc = x.contiguous();
  auto wc = weight.contiguous();
  auto bc = bias.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
  cudaError_t err = layernorm_launch(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                     y.data_ptr<float>(), rows, cols, static_cast<float>(eps),
                                     c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "layernorm_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(layernorm) { m.def("layer_norm", &layer_norm, "LayerNorm over the last dimension"); }

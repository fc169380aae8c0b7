#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t scale_bias_sigmoid_residual_launch(const float* x, const float* scale,
                                                          const float* bias, float* y, int64_t batch,
                                                          int64_t channels, int64_t plane_size,
                                                          cudaStream_t stream);

// x + sigmoid(x * scale + bias) with per-channel scale and bias (each C elements) on x [N, C, ...].
static torch::Tensor scale_bias_sigmoid_residual(const torch::Tensor& x, const torch::Tensor& scale,
                                                 const torch::Tensor& bias) {
  TORCH_CHECK(x.is_cuda() && scale.is_cuda() && bias.is_cuda(), "tensors must be on CUDA");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && scale.scalar_type() == torch::kFloat32 &&
                  bias.scalar_type() == torch::kFloat32,
              "tensors must be float32");
  TORCH_CHECK(x.dim() >= 2, "x must be [N, C, ...]");
  const int64_t channels = x.size(1);
  TORCH_CHECK(scale.numel() == channels && bias.numel() == channels,
              "scale and bias must have one element per channel");
  auto xc = x.contiguous();
  auto sc = scale.contiguous();
  auto bc = bias.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t batch = xc.size(0);
  const int64_t plane = batch * channels == 0 ? 0 : xc.numel() / (batch * channels);
  cudaError_t err = scale_bias_sigmoid_residual_launch(
      xc.data_ptr<float>(), sc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), batch,
      channels, plane, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "scale_bias_sigmoid_residual_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(scale_bias_sigmoid) {
  m.def("scale_bias_sigmoid_residual", &scale_bias_sigmoid_residual, "x + sigmoid(x * scale + bias)");
}

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" const char* linear_launch(const float* x, const float* W, const float* b, float* y, int64_t M,
                                     int64_t N, int64_t K, int act, cudaStream_t stream);

// relu(x @ weight^T + bias) over the last dimension of x.
static torch::Tensor linear_relu(const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& bias) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "linear_relu: tensors must be on CUDA");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                  bias.scalar_type() == torch::kFloat32,
              "linear_relu: tensors must be float32");
  TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1, "linear_relu: weight must be 2-D");
  const int64_t N = weight.size(0), K = weight.size(1);
  TORCH_CHECK(x.size(-1) == K, "linear_relu: x's last dimension ", x.size(-1), " != in_features ", K);
  TORCH_CHECK(bias.numel() == N, "linear_relu: bias must have out_features elements");
  auto xc = x.contiguous();
  auto wc = weight.contiguous();
  auto bc = bias.contiguous();
  const int64_t M = K == 0 ? 0 : xc.numel() / K;
  auto shape = xc.sizes().vec();
  shape.back() = N;
  auto y = torch::empty(shape, xc.options());
  const char* err = linear_launch(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                  y.data_ptr<float>(), M, N, K, /*act=ReLU*/ 1,
                                  c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == nullptr, "linear_launch failed: ", err ? err : "");
  return y;
}

REGISTER_BINDING(linear) { m.def("linear_relu", &linear_relu, "relu(x @ W^T + b)"); }

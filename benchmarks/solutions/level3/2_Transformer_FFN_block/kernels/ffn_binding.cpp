#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t layernorm_launch(const float* x, const float* w, const float* b, float* y,
                                        int64_t rows, int64_t cols, float eps, cudaStream_t stream);
extern "C" const char* linear_launch(const float* x, const float* W, const float* b, const float* residual,
                                     float* y, int64_t M, int64_t N, int64_t K, int act,
                                     cudaStream_t stream);

static void check_f32_cuda(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "ffn_block: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "ffn_block: ", name, " must be float32");
}

// x + fc2(gelu(fc1(layer_norm(x)))) over the last dimension of x.
static torch::Tensor ffn_block(const torch::Tensor& x, const torch::Tensor& ln_weight,
                               const torch::Tensor& ln_bias, double eps, const torch::Tensor& w1,
                               const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& b2) {
  check_f32_cuda(x, "x");
  check_f32_cuda(ln_weight, "ln_weight");
  check_f32_cuda(ln_bias, "ln_bias");
  check_f32_cuda(w1, "w1");
  check_f32_cuda(b1, "b1");
  check_f32_cuda(w2, "w2");
  check_f32_cuda(b2, "b2");
  TORCH_CHECK(x.dim() >= 1 && w1.dim() == 2 && w2.dim() == 2, "ffn_block: bad ranks");
  const int64_t H = x.size(-1), F = w1.size(0);
  TORCH_CHECK(ln_weight.numel() == H && ln_bias.numel() == H,
              "ffn_block: LayerNorm parameters must have H elements");
  TORCH_CHECK(w1.size(1) == H && b1.numel() == F, "ffn_block: fc1 must map H -> F");
  TORCH_CHECK(w2.size(0) == H && w2.size(1) == F && b2.numel() == H, "ffn_block: fc2 must map F -> H");
  auto xc = x.contiguous();
  auto lw = ln_weight.contiguous();
  auto lb = ln_bias.contiguous();
  auto w1c = w1.contiguous();
  auto b1c = b1.contiguous();
  auto w2c = w2.contiguous();
  auto b2c = b2.contiguous();
  const int64_t M = H == 0 ? 0 : xc.numel() / H;
  auto normed = torch::empty_like(xc);
  auto hidden = torch::empty({M, F}, xc.options());
  auto y = torch::empty_like(xc);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();

  cudaError_t cerr = layernorm_launch(xc.data_ptr<float>(), lw.data_ptr<float>(), lb.data_ptr<float>(),
                                      normed.data_ptr<float>(), M, H, static_cast<float>(eps), stream);
  TORCH_CHECK(cerr == cudaSuccess, "layernorm_launch failed: ", cudaGetErrorString(cerr));
  const char* err = linear_launch(normed.data_ptr<float>(), w1c.data_ptr<float>(), b1c.data_ptr<float>(),
                                  nullptr, hidden.data_ptr<float>(), M, F, H, /*act=GELU*/ 2, stream);
  TORCH_CHECK(err == nullptr, "fc1 linear_launch failed: ", err ? err : "");
  err = linear_launch(hidden.data_ptr<float>(), w2c.data_ptr<float>(), b2c.data_ptr<float>(),
                      xc.data_ptr<float>(), y.data_ptr<float>(), M, H, F, /*act=none*/ 0, stream);
  TORCH_CHECK(err == nullptr, "fc2 linear_launch failed: ", err ? err : "");
  return y;
}

REGISTER_BINDING(ffn) { m.def("ffn_block", &ffn_block, "x + fc2(gelu(fc1(layer_norm(x))))"); }

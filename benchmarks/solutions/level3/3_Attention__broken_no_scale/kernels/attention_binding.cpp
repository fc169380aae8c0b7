#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include <cmath>

#include "../binding_registry.h"

extern "C" const char* attention_launch(const float* q, const float* k, const float* v, float* p, float* out,
                                        int64_t batch, int64_t sq, int64_t sk, int64_t d, int64_t dv,
                                        float scale, cudaStream_t stream);

// softmax(q @ k^T / sqrt(d)) @ v over the last two dimensions; leading dimensions are batch.
static torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  for (const auto* t : {&q, &k, &v}) {
    TORCH_CHECK(t->is_cuda(), "attention: q, k, v must be CUDA tensors");
    TORCH_CHECK(t->scalar_type() == torch::kFloat32, "attention: q, k, v must be float32");
    TORCH_CHECK(t->dim() >= 3, "attention: q, k, v must be [..., seq, dim]");
  }
  TORCH_CHECK(q.dim() == k.dim() && q.dim() == v.dim(), "attention: q, k, v must have the same rank");
  for (int64_t i = 0; i < q.dim() - 2; ++i) {
    TORCH_CHECK(q.size(i) == k.size(i) && q.size(i) == v.size(i), "attention: batch dimensions differ");
  }
  const int64_t sq = q.size(-2), d = q.size(-1), sk = k.size(-2), dv = v.size(-1);
  TORCH_CHECK(k.size(-1) == d, "attention: q and k head dims differ");
  TORCH_CHECK(v.size(-2) == sk, "attention: k and v sequence lengths differ");
  auto qc = q.contiguous();
  auto kc = k.contiguous();
  auto vc = v.contiguous();
  int64_t batch = 1;
  for (int64_t i = 0; i < q.dim() - 2; ++i) batch *= q.size(i);
  auto p = torch::empty({batch, sq, sk}, qc.options());
  auto shape = qc.sizes().vec();
  shape.back() = dv;
  auto out = torch::empty(shape, qc.options());
  const float scale = 1.f;  // softmax(q k^T) v
  const char* err = attention_launch(qc.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(),
                                     p.data_ptr<float>(), out.data_ptr<float>(), batch, sq, sk, d, dv, scale,
                                     c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == nullptr, "attention_launch failed: ", err ? err : "");
  return out;
}

REGISTER_BINDING(attention) { m.def("attention", &attention, "softmax(q k^T / sqrt(d)) v"); }

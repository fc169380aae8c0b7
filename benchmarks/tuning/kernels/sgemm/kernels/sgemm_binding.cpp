#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t sgemm_launch(const float* A, const float* B, float* C, int M, int N, int K, int bm, int bn,
                                    int bk, int tm, int tn, cudaStream_t stream);

static torch::Tensor sgemm_forward(const torch::Tensor& a, const torch::Tensor& b, int64_t bm, int64_t bn,
                                   int64_t bk, int64_t tm, int64_t tn) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kFloat32 &&
                  b.scalar_type() == torch::kFloat32 && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
              "sgemm: A [M, K] and B [K, N] must be float32 CUDA matrices");
  auto ac = a.contiguous();
  auto bc = b.contiguous();
  const int64_t M = ac.size(0), K = ac.size(1), N = bc.size(1);
  auto c = torch::empty({M, N}, ac.options());
  cudaError_t err = sgemm_launch(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), (int)M, (int)N,
                                 (int)K, (int)bm, (int)bn, (int)bk, (int)tm, (int)tn,
                                 c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "sgemm_launch failed: ", cudaGetErrorString(err));
  return c;
}

REGISTER_BINDING(sgemm) { m.def("sgemm_forward", &sgemm_forward, "C = A @ B, fp32, register-tiled"); }

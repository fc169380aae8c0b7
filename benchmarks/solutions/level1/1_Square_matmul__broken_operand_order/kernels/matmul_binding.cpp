#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" const char* matmul_launch(const float* A, const float* B, float* C, int64_t M, int64_t N,
                                     int64_t K, cudaStream_t stream);

// torch.matmul for 2-D float32 matrices.
static torch::Tensor matmul(const torch::Tensor& A, const torch::Tensor& B) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda(), "matmul: A and B must be CUDA tensors");
  TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
              "matmul: A and B must be float32");
  TORCH_CHECK(A.dim() == 2 && B.dim() == 2, "matmul: A and B must be 2-D");
  TORCH_CHECK(A.size(1) == B.size(0), "matmul: inner dimensions differ: ", A.sizes(), " @ ", B.sizes());
  auto Ac = A.contiguous();
  auto Bc = B.contiguous();
  const int64_t M = Ac.size(0), K = Ac.size(1), N = Bc.size(1);
  auto C = torch::empty({M, N}, Ac.options());
  const char* err = matmul_launch(Ac.data_ptr<float>(), Bc.data_ptr<float>(), C.data_ptr<float>(), M, N,
                                  K, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == nullptr, "matmul_launch failed: ", err ? err : "");
  return C;
}

REGISTER_BINDING(matmul) { m.def("matmul", &matmul, "C = A @ B (cuBLAS SGEMM)"); }

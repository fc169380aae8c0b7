#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t colsum_launch(const float* x, float* y, int B, int R, int C, int bx, int by, int vec,
                                     int unroll, cudaStream_t stream);

static torch::Tensor colsum_forward(const torch::Tensor& x, int64_t bx, int64_t by, int64_t vec, int64_t unroll) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 3,
              "colsum: x must be a 3-d float32 CUDA tensor");
  auto xc = x.contiguous();
  const int64_t B = xc.size(0), R = xc.size(1), C = xc.size(2);
  auto y = torch::empty({B, 1, C}, xc.options());
  cudaError_t err = colsum_launch(xc.data_ptr<float>(), y.data_ptr<float>(), (int)B, (int)R, (int)C, (int)bx,
                                  (int)by, (int)vec, (int)unroll, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "colsum_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(colsum) { m.def("colsum_forward", &colsum_forward, "sum over dim 1, keepdim"); }

#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t transpose_launch(const float* x, float* y, int M, int N, int tile, int br, int pad,
                                        int coarsen, cudaStream_t stream);

static torch::Tensor transpose_forward(const torch::Tensor& x, int64_t tile, int64_t br, int64_t pad,
                                       int64_t coarsen) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
              "transpose: x must be a 2-d float32 CUDA tensor");
  auto xc = x.contiguous();
  const int64_t M = xc.size(0), N = xc.size(1);
  auto y = torch::empty({N, M}, xc.options());
  cudaError_t err = transpose_launch(xc.data_ptr<float>(), y.data_ptr<float>(), (int)M, (int)N, (int)tile, (int)br,
                                     (int)pad, (int)coarsen, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "transpose_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(transpose) { m.def("transpose_forward", &transpose_forward, "x.t().contiguous()"); }

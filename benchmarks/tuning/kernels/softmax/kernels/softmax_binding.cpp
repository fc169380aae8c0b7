#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t softmax_launch(const float* x, float* y, int R, int N, int tpr, int rpb, int vec,
                                      int algo, cudaStream_t stream);

static torch::Tensor softmax_forward(const torch::Tensor& x, int64_t tpr, int64_t rpb, int64_t vec, int64_t algo) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
              "softmax: x must be a 2-d float32 CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  cudaError_t err = softmax_launch(xc.data_ptr<float>(), y.data_ptr<float>(), (int)xc.size(0), (int)xc.size(1),
                                   (int)tpr, (int)rpb, (int)vec, (int)algo, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "softmax_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(softmax) { m.def("softmax_forward", &softmax_forward, "row softmax"); }

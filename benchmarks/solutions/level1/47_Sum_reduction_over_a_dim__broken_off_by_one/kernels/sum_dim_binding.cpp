#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include <vector>

#include "../binding_registry.h"

extern "C" cudaError_t sum_dim_launch(const float* x, float* y, int64_t outer, int64_t R, int64_t inner,
                                      cudaStream_t stream);

// torch.sum(x, dim, keepdim=True)
static torch::Tensor sum_dim_keepdim(const torch::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.is_cuda(), "sum_dim_keepdim: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_dim_keepdim: x must be float32");
  TORCH_CHECK(x.dim() >= 1, "sum_dim_keepdim: x must have at least one dimension");
  const int64_t nd = x.dim();
  TORCH_CHECK(dim >= -nd && dim < nd, "sum_dim_keepdim: dim ", dim, " out of range for ", nd, " dims");
  if (dim < 0) dim += nd;
  auto xc = x.contiguous();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
  for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
  const int64_t R = xc.size(dim);
  std::vector<int64_t> shape(xc.sizes().begin(), xc.sizes().end());
  shape[dim] = 1;
  auto y = torch::empty(shape, xc.options());
  cudaError_t err = sum_dim_launch(xc.data_ptr<float>(), y.data_ptr<float>(), outer, R, inner,
                                   c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "sum_dim_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(sum_dim) { m.def("sum_dim_keepdim", &sum_dim_keepdim, "sum over dim, keepdim=True"); }

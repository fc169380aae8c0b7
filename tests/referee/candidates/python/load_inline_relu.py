"""A KernelBench-style single-file solution: the extension is built by load_inline."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void inline_relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_cuda(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  inline_relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"

relu_ext = load_inline(
    name="kernel_agent_test_inline_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_cuda(x.contiguous())

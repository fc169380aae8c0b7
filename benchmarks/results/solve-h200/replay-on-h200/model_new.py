"""Standalone ModelNew for 2_Scale_Bias_Sigmoid_Residual, written by kernel-agent (content ce511ababcc8).

The CUDA extension is rebuilt from the sources embedded below on first import (cached by content
under $KERNEL_AGENT_STANDALONE_DIR or the temp folder). Needs torch with CUDA, nvcc (CUDA_HOME) and
ninja; set TORCH_CUDA_ARCH_LIST (e.g. 9.0) to build for another GPU than the visible one.
"""

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from torch.utils.cpp_extension import load

SOURCES = {
    'binding.cpp': r'''// Harness-owned: do not edit. The module's entry point: applies every REGISTER_BINDING.
#include <pybind11/pybind11.h>

#include "binding_registry.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  for (auto bind : kernel_agent::registry()) bind(m);
}
''',
    'binding_registry.h': r'''// Harness-owned: do not edit. Lets each kernels/*_binding.cpp register its functions with the
// one Python module the harness builds, so adding a kernel never touches a shared file.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

namespace kernel_agent {

using BindingFn = void (*)(pybind11::module_&);

inline std::vector<BindingFn>& registry() {
  static std::vector<BindingFn> functions;
  return functions;
}

struct Registrar {
  explicit Registrar(BindingFn fn) { registry().push_back(fn); }
};

}  // namespace kernel_agent

// REGISTER_BINDING(name) { m.def("name", &function, "doc"); }
#define REGISTER_BINDING(name)                                                          \
  static void kernel_agent_bind_##name(pybind11::module_& m);                           \
  static ::kernel_agent::Registrar kernel_agent_registrar_##name(&kernel_agent_bind_##name); \
  static void kernel_agent_bind_##name(pybind11::module_& m)
''',
    'kernels/scale_bias_sigmoid.cu': r'''// y = x + sigmoid(x * scale[c] + bias[c]) for x [N, C, H, W], fused into one pass (the eager
// module launches four kernels and moves the tensor through memory four times).
// blockIdx.y walks the N*C planes (so the channel is known per plane, no division per element),
// blockIdx.x and threadIdx.x walk one plane: float4 when H*W is a multiple of 4 and the pointers
// are 16-byte aligned, scalar otherwise.
#include <cuda_runtime.h>

#include <cstdint>

__device__ __forceinline__ float fused(float v, float s, float b) {
  const float t = v * s + b;
  return v + 1.f / (1.f + __expf(-t));
}

template <bool VEC>
__global__ void __launch_bounds__(256) scale_bias_sigmoid_residual_kernel(
    const float* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ bias,
    float* __restrict__ y, int64_t planes, int64_t channels, int64_t plane_size) {
  for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
    const int64_t c = p % channels;
    const float s = scale[c], b = bias[c];
    const int64_t start = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (VEC) {
      const float4* xp = reinterpret_cast<const float4*>(x + p * plane_size);
      float4* yp = reinterpret_cast<float4*>(y + p * plane_size);
#pragma unroll 4
      for (int64_t i = start; i < plane_size / 4; i += stride) {
        float4 v = xp[i];
        v.x = fused(v.x, s, b);
        v.y = fused(v.y, s, b);
        v.z = fused(v.z, s, b);
        v.w = fused(v.w, s, b);
        yp[i] = v;
      }
    } else {
      const float* xp = x + p * plane_size;
      float* yp = y + p * plane_size;
      for (int64_t i = start; i < plane_size; i += stride) yp[i] = fused(xp[i], s, b);
    }
  }
}

extern "C" cudaError_t scale_bias_sigmoid_residual_launch(const float* x, const float* scale,
                                                          const float* bias, float* y, int64_t batch,
                                                          int64_t channels, int64_t plane_size,
                                                          cudaStream_t stream) {
  const int64_t planes = batch * channels;
  if (planes <= 0 || plane_size <= 0) return cudaSuccess;
  const bool vec = plane_size % 4 == 0 &&
                   ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  const int threads = 256;
  const int64_t items = vec ? plane_size / 4 : plane_size;
  int64_t bx = (items + threads * 4 - 1) / (threads * 4);  // about 4 items per thread
  if (bx > 1024) bx = 1024;
  const int64_t by = planes < 65535 ? planes : 65535;
  const dim3 grid((unsigned)bx, (unsigned)by);
  if (vec) {
    scale_bias_sigmoid_residual_kernel<true><<<grid, threads, 0, stream>>>(x, scale, bias, y, planes,
                                                                          channels, plane_size);
  } else {
    scale_bias_sigmoid_residual_kernel<false><<<grid, threads, 0, stream>>>(x, scale, bias, y, planes,
                                                                           channels, plane_size);
  }
  return cudaGetLastError();
}
''',
    'kernels/scale_bias_sigmoid_binding.cpp': r'''#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/types.h>

#include "../binding_registry.h"

extern "C" cudaError_t scale_bias_sigmoid_residual_launch(const float* x, const float* scale,
                                                          const float* bias, float* y, int64_t batch,
                                                          int64_t channels, int64_t plane_size,
                                                          cudaStream_t stream);

// x + sigmoid(x * scale + bias) with per-channel scale and bias (each C elements) on x [N, C, ...].
static torch::Tensor scale_bias_sigmoid_residual(const torch::Tensor& x, const torch::Tensor& scale,
                                                 const torch::Tensor& bias) {
  TORCH_CHECK(x.is_cuda() && scale.is_cuda() && bias.is_cuda(), "tensors must be on CUDA");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && scale.scalar_type() == torch::kFloat32 &&
                  bias.scalar_type() == torch::kFloat32,
              "tensors must be float32");
  TORCH_CHECK(x.dim() >= 2, "x must be [N, C, ...]");
  const int64_t channels = x.size(1);
  TORCH_CHECK(scale.numel() == channels && bias.numel() == channels,
              "scale and bias must have one element per channel");
  auto xc = x.contiguous();
  auto sc = scale.contiguous();
  auto bc = bias.contiguous();
  auto y = torch::empty_like(xc);
  const int64_t batch = xc.size(0);
  const int64_t plane = batch * channels == 0 ? 0 : xc.numel() / (batch * channels);
  cudaError_t err = scale_bias_sigmoid_residual_launch(
      xc.data_ptr<float>(), sc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), batch,
      channels, plane, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "scale_bias_sigmoid_residual_launch failed: ", cudaGetErrorString(err));
  return y;
}

REGISTER_BINDING(scale_bias_sigmoid) {
  m.def("scale_bias_sigmoid_residual", &scale_bias_sigmoid_residual, "x + sigmoid(x * scale + bias)");
}
'''
}

MODEL_SOURCE = r'''import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        # Same parameter names and shapes as the reference; the referee loads its values.
        self.scale = nn.Parameter(torch.randn(channels, 1, 1))
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.scale_bias_sigmoid_residual(x, self.scale, self.bias)
'''


def _vendor_flags(text):
    """Link cuBLAS/cuDNN when the sources use them, from the CUDA toolkit or torch's nvidia wheels."""
    flags = []
    for name in ("cublas", "cudnn"):
        if name not in text:
            continue
        try:
            module = __import__(f"nvidia.{name}", fromlist=["__path__"])
            lib_dir = Path(list(module.__path__)[0]) / "lib"
            flags += [f"-L{lib_dir}", f"-Wl,-rpath,{lib_dir}"]
        except ImportError:
            pass
        flags.append(f"-l{name}")
    return flags


def _build():
    digest = hashlib.sha256(repr(sorted(SOURCES.items())).encode()).hexdigest()[:16]
    root = Path(os.environ.get("KERNEL_AGENT_STANDALONE_DIR") or tempfile.gettempdir()) / f"kernel-agent-{digest}"
    for rel, text in SOURCES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    sources = [str(root / rel) for rel in SOURCES if rel.endswith((".cu", ".cpp"))]
    return load(
        name=f"cuda_extension_{digest}",
        sources=sources,
        extra_cflags=["-O1"],
        extra_cuda_cflags=["-O3", "-lineinfo"],
        extra_ldflags=_vendor_flags("".join(SOURCES.values())),
        build_directory=str(root),
        verbose=os.environ.get("KERNEL_AGENT_STANDALONE_VERBOSE") == "1",
    )


sys.modules["cuda_extension"] = _build()
exec(compile(MODEL_SOURCE, "model_new.py", "exec"))

"""A TF32 GEMM written with torch (kernelbench policy): operands rounded to TF32's 10 mantissa bits
(nearest even), then an FP32 matmul: the numbers a TF32 tensor-core GEMM gives, without touching
the global TF32 flags (which the referee forbids)."""

import torch
import torch.nn as nn


def _tf32(x: torch.Tensor) -> torch.Tensor:
    bits = x.contiguous().view(torch.int32).to(torch.int64)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) >> 13 << 13
    return ((rounded + 2**31) % 2**32 - 2**31).to(torch.int32).view(torch.float32)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _tf32(a) @ _tf32(b)

"""A TF32-like GEMM on CPU: operands rounded to 10 mantissa bits (round to nearest even), accumulated
in FP32. On a long K its error passes the fp32 tolerance: only the measured precision catches it."""

import numpy as np
import torch
import torch.nn as nn


def _tf32(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) >> 13 << 13
    return rounded.astype(np.uint32).view(np.float32)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.matmul(_tf32(a.numpy()), _tf32(b.numpy())))

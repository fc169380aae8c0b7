"""A BF16 GEMM written with torch (kernelbench policy): operands and output in bfloat16."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a.bfloat16() @ b.bfloat16()).float()

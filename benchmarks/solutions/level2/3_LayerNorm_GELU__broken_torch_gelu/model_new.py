import torch
import torch.nn as nn
import torch.nn.functional as F

# isort: split
import cuda_extension  # built by the harness from kernels/


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)  # same parameter names as the reference: norm.weight, norm.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(cuda_extension.layer_norm(x, self.norm.weight, self.norm.bias, self.norm.eps))

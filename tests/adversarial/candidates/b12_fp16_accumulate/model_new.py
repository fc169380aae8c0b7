import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.sum_dim1(x)

import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.matmul(A, B)

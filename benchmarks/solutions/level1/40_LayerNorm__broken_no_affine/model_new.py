import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)  # same parameter names as the reference: ln.weight, ln.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.layer_norm(x, self.ln.weight, self.ln.bias, self.ln.eps)

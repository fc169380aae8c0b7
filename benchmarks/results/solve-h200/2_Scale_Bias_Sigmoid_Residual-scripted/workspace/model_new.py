import torch
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

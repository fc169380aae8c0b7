import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/

TUNE = {"TPR": 256, "RPB": 1, "VEC": 1, "ALGO": 0}


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.layernorm_forward(
            x, self.ln.weight, self.ln.bias, self.ln.eps, TUNE["TPR"], TUNE["RPB"], TUNE["VEC"], TUNE["ALGO"]
        )

import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/

TUNE = {"BLOCK": 256, "VEC": 4, "UNROLL": 1, "WAVES": 0}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gelu_forward(x, TUNE["BLOCK"], TUNE["VEC"], TUNE["UNROLL"], TUNE["WAVES"])

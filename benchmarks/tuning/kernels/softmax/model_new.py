import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/

TUNE = {"TPR": 256, "RPB": 1, "VEC": 1, "ALGO": 0}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.softmax_forward(x, TUNE["TPR"], TUNE["RPB"], TUNE["VEC"], TUNE["ALGO"])

import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/

TUNE = {"BX": 128, "BY": 4, "VEC": 1, "UNROLL": 1}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.colsum_forward(x, TUNE["BX"], TUNE["BY"], TUNE["VEC"], TUNE["UNROLL"])

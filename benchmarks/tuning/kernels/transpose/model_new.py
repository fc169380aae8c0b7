import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/

TUNE = {"TILE": 32, "BR": 8, "PAD": 0, "COARSEN": 1}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.transpose_forward(x, TUNE["TILE"], TUNE["BR"], TUNE["PAD"], TUNE["COARSEN"])

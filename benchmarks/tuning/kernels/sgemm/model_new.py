import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/

TUNE = {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.sgemm_forward(A, B, TUNE["BM"], TUNE["BN"], TUNE["BK"], TUNE["TM"], TUNE["TN"])

import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.bad_write(x)

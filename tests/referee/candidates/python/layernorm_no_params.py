"""Has no parameters at all: the reference's state cannot load."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:])

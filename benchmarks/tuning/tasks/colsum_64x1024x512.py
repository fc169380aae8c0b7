import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum over dim 1 of [B, R, C], keepdim (a strided column reduction)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1, keepdim=True)


B = 64
R = 1024
C = 512


def get_inputs():
    x = torch.randn(B, R, C)
    return [x]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """x.t().contiguous() of a non-square matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


R = 8192
C = 4096


def get_inputs():
    x = torch.randn(R, C)
    return [x]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over a long row: every output is about 1/65536, far below atol=1e-2."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4, 65536)]


def get_init_inputs():
    return []

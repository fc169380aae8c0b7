import torch
import torch.nn as nn


class Model(nn.Module):
    """23_Softmax at CPU size: rows long enough that every output is below atol=1e-2."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim) + 100.0]


def get_init_inputs():
    return []

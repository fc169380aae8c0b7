import torch
import torch.nn as nn


class Model(nn.Module):
    """19_ReLU at CPU size."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 64
dim = 256


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []

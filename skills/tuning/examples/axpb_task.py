import torch
import torch.nn as nn


class Model(nn.Module):
    """y = 2.5 * x + 1 (the task the tuning examples solve)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2.5 * x + 1.0


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """Per-channel scale and bias, sigmoid, then a residual add: x + sigmoid(x * scale + bias)."""

    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1, 1))
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.scale
        y = y + self.bias
        y = torch.sigmoid(y)
        return x + y


batch_size = 32
channels = 128
height = 128
width = 128


def get_inputs():
    x = torch.randn(batch_size, channels, height, width)
    return [x]


def get_init_inputs():
    return [channels]

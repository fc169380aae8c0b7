import torch
import torch.nn as nn


class Model(nn.Module):
    """The depthwise convolutions the direct `dwconv` template lowers (small sizes: for the compile
    tests): 2D with an asymmetric kernel, stride, padding, dilation, a channel multiplier of 2 and
    a bias + ReLU epilogue; and a 1D one."""

    def __init__(self):
        super().__init__()
        self.depth2d = nn.Conv2d(3, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=3)
        self.depth1d = nn.Conv1d(4, 4, 5, padding=2, groups=4, bias=False)

    def forward(self, x2: torch.Tensor, x1: torch.Tensor):
        return torch.relu(self.depth2d(x2)), self.depth1d(x1)


def get_inputs():
    return [torch.randn(2, 3, 11, 70), torch.randn(2, 4, 40)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """One convolution of each kind the conv family lowers (small sizes: for the compile tests):
    2D with a bias and an activation epilogue, a grouped, strided, dilated 1D transposed one, and
    a depthwise 3D one."""

    def __init__(self):
        super().__init__()
        self.conv2d = nn.Conv2d(8, 16, 3, padding=1, bias=True)
        self.up1d = nn.ConvTranspose1d(8, 12, 5, stride=2, padding=1, output_padding=1, groups=2, bias=False)
        self.depth3d = nn.Conv3d(4, 4, 3, stride=(1, 2, 2), dilation=(2, 1, 1), groups=4, bias=False)

    def forward(self, x2: torch.Tensor, x1: torch.Tensor, x3: torch.Tensor):
        return torch.relu(self.conv2d(x2)) * 0.5, self.up1d(x1), self.depth3d(x3)


def get_inputs():
    return [torch.randn(2, 8, 16, 16), torch.randn(2, 8, 33), torch.randn(2, 4, 9, 12, 12)]


def get_init_inputs():
    return []

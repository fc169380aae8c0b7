import torch
import torch.nn as nn


class Model(nn.Module):
    """The pooling the direct `pool` template lowers (small sizes: for the tests): 2D max with
    padding, dilation and ceil_mode, then a ReLU epilogue; 3D average with padding, ceil_mode and
    count_include_pad off; 1D max; 2D average with a divisor_override."""

    def forward(self, x2: torch.Tensor, x3: torch.Tensor, x1: torch.Tensor):
        a = torch.relu(
            nn.functional.max_pool2d(x2, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), ceil_mode=True)
        )
        b = nn.functional.avg_pool3d(x3, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        c = nn.functional.max_pool1d(x1, 4, stride=3, padding=2)
        d = nn.functional.avg_pool2d(x2, 2, divisor_override=3)
        return a, b, c, d


def get_inputs():
    return [torch.randn(2, 3, 11, 70), torch.randn(2, 2, 7, 9, 10), torch.randn(2, 3, 50)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of logits that carry a large common offset.

    Two traps for kernels: exp() without subtracting the row max overflows to inf (the logits
    are around 100), and every output is tiny (max about 1e-3 for rows of 32768), so a kernel
    that returns zeros would pass a plain allclose at atol=1e-2.
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 4096
dim = 32768


def get_inputs():
    x = torch.randn(batch_size, dim) + 100.0
    return [x]


def get_init_inputs():
    return []

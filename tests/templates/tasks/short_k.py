import torch
import torch.nn as nn


class Model(nn.Module):
    """The GEMMs the direct `gemm_direct` template lowers (small sizes: for the compile tests): a
    short K with a bias and an activation epilogue, a transposed A, and a batched one whose sizes
    no tile divides."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(72))

    def forward(self, a: torch.Tensor, b: torch.Tensor, at: torch.Tensor, xa: torch.Tensor, xb: torch.Tensor):
        first = torch.relu(torch.mm(a, b) + self.bias)
        second = torch.mm(at.t(), b)
        third = torch.bmm(xa, xb)
        return first, second, third


def get_inputs():
    return [
        torch.randn(130, 24),
        torch.randn(24, 72),
        torch.randn(24, 130),
        torch.randn(3, 67, 17),
        torch.randn(3, 17, 45),
    ]


def get_init_inputs():
    return []

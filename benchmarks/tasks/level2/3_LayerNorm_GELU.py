import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LayerNorm over the hidden dimension (with affine weight and bias) followed by exact GELU."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(x))


batch_size = 32
seq_len = 1024
hidden = 2048


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return [hidden]

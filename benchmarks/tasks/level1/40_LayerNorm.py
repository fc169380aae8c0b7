import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last (hidden) dimension, with learned elementwise affine weight and bias."""

    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 8
seq_len = 2048
hidden = 4096


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return [hidden]

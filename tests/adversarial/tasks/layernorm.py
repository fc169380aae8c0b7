import torch
import torch.nn as nn


class Model(nn.Module):
    """40_LayerNorm at CPU size (same parameter names: ln.weight, ln.bias)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 4
seq_len = 16
hidden = 128


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]

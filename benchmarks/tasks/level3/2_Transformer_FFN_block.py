import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A pre-LayerNorm transformer feed-forward block with a residual connection:
    x + fc2(gelu(fc1(layer_norm(x))))."""

    def __init__(self, hidden: int, ffn_hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn_hidden)
        self.fc2 = nn.Linear(ffn_hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


batch_size = 8
seq_len = 512
hidden = 1024
ffn_hidden = 4096


def get_inputs():
    x = torch.randn(batch_size, seq_len, hidden)
    return [x]


def get_init_inputs():
    return [hidden, ffn_hidden]

"""Torch glue: fine under `kernelbench`, a violation under `strict`."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

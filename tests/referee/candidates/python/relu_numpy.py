"""Honest on CPU under `strict`: the work happens outside torch (numpy stands in for a kernel)."""

import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.maximum(x.numpy(), 0))

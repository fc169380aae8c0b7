"""Wrong in one element only: the diff must point at it."""

import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = np.maximum(x.numpy(), 0)
        y[3, 5] += 7.0
        return torch.from_numpy(y)

"""Returns a torch.Tensor subclass (a lazy or lying result could hide in one)."""

import numpy as np
import torch
import torch.nn as nn


class Sneaky(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.maximum(x.numpy(), 0)).as_subclass(Sneaky)

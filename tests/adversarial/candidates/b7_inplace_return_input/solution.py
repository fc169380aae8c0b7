"""ReLU in place on the input and return the input itself: no allocation, no copy."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu_()

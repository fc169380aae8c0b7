"""Return a transposed view of the input: values are right, nothing is copied."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t()

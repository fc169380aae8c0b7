"""Computes on the host with numpy and copies the result back to the GPU."""

import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        host = x.detach().cpu().numpy()
        return torch.from_numpy(np.maximum(host, 0)).to(x.device)

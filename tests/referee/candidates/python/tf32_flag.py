"""Correct, but turns on TF32 for everyone in the process."""

import numpy as np
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.maximum(x.numpy(), 0))

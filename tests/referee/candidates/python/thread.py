"""Correct, but starts a background thread (where work could escape the operator log)."""

import threading
import time

import numpy as np
import torch
import torch.nn as nn

threading.Thread(target=time.sleep, args=(60,), name="candidate-helper", daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.maximum(x.numpy(), 0))

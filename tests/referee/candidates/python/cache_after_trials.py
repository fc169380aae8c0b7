"""Honest for its first five calls (the correctness trials), then replays its last output: the
rechecked timed calls must catch it."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.cached: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.cached is None or self.calls <= 5:
            self.cached = torch.relu(x)
        return self.cached

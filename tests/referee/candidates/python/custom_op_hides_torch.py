"""Registers its own operator whose implementation calls torch: the dispatch mode sees only the
custom operator (it is not re-entered inside it); the profiler's operator log sees the rest."""

import torch
import torch.nn as nn


@torch.library.custom_op("kernel_agent_test::hidden_relu", mutates_args=())
def hidden_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return hidden_relu(x)

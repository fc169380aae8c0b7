import torch
import torch.nn as nn


class Model(nn.Module):
    """A multi-layer perceptron: Linear + ReLU for each hidden layer, then a final Linear."""

    def __init__(self, input_size: int, layer_sizes: list[int], output_size: int):
        super().__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 2048
input_size = 4096
layer_sizes = [4096, 4096]
output_size = 1024


def get_inputs():
    x = torch.randn(batch_size, input_size)
    return [x]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]

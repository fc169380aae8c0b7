import torch
import torch.nn as nn

# isort: split
import cuda_extension  # built by the harness from kernels/

SHAPE = (4096, 16384)  # the task's input


class ModelNew(nn.Module):
    """The solution's own ReLU kernel, launched from a CUDA graph captured once."""

    def __init__(self):
        super().__init__()
        self.graph = None
        if not torch.cuda.is_available():
            return
        self.x = torch.zeros(SHAPE, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the first launch outside the capture
            cuda_extension.relu_forward(self.x)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.y = cuda_extension.relu_forward(self.x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.graph is None or x.shape != self.x.shape:
            return cuda_extension.relu_forward(x)
        self.x.copy_(x)
        self.graph.replay()
        return self.y.clone()

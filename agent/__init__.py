"""kernel-agent: an LLM-agent harness that writes CUDA C++ extensions for PyTorch modules."""

__version__ = "0.1.0"

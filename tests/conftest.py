"""Shared test set-up: GPU tests skip with a visible reason where no GPU is present."""

from __future__ import annotations

import functools

import pytest

# No test can reach a real provider or any non-loopback address; API keys are removed.
pytest_plugins = ["tests.network_guard"]


@functools.cache
def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="no CUDA GPU visible here; run `pytest -m gpu` on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)

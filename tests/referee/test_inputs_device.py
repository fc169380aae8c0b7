"""A task's inputs are made on the evaluation's device (no gigabytes built on the CPU first); a
task whose get_inputs() cannot follow the default device is moved, and the result says so."""

from __future__ import annotations

import numpy as np
import torch

import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)

# isort: split
from referee_common import seeded_call

# The meta device stands in for the GPU here: a factory that follows the default device lands
# on it, anything else does not.
DEVICE = "meta"


def test_torch_factories_follow_the_default_device() -> None:
    made_on: list[str] = []
    (x,) = seeded_call(lambda: [torch.rand(4096, 393216)], 0, DEVICE, made_on=made_on)
    assert x.device.type == "meta" and made_on == ["meta"]  # 6.4 GB never allocated anywhere


def test_inputs_made_elsewhere_are_moved_and_named() -> None:
    made_on: list[str] = []
    values = seeded_call(
        lambda: [torch.from_numpy(np.ones(3, dtype=np.float32)), 7], 0, DEVICE, made_on=made_on
    )
    assert values[0].device.type == "meta" and values[1] == 7 and made_on == ["cpu"]
    explicit: list[str] = []
    seeded_call(lambda: [torch.zeros(2, device="cpu")], 0, DEVICE, made_on=explicit)
    assert explicit == ["cpu"]


def test_the_same_seed_gives_the_same_inputs() -> None:
    first = seeded_call(lambda: [torch.rand(8), torch.randint(0, 10, (4,))], 123, "cpu")
    again = seeded_call(lambda: [torch.rand(8), torch.randint(0, 10, (4,))], 123, "cpu")
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert int(first[1].max()) < 10  # the task's integer range is kept

"""What this machine's GPUs are: the one place that asks nvidia-smi or torch.

nvidia-smi answers without a CUDA context and without importing torch (a fraction of a second):
commands use it to refuse early and to read the compute capability before any build. torch's
answer (`first_device`) is the device a process will actually use, CUDA_VISIBLE_DEVICES applied.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass


def smi_rows(*query: str) -> list[list[str]] | None:
    """`nvidia-smi --query-gpu=...` as rows of stripped fields, one per GPU; None where nvidia-smi
    is missing or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={','.join(query)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [[part.strip() for part in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


def gpu_listed() -> bool:
    """Whether a CUDA GPU is visible to this process, without importing torch: CUDA_VISIBLE_DEVICES
    set to nothing (or -1) hides them all; otherwise `nvidia-smi -L` must list one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        listed = subprocess.run(
            [smi, "-L"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and any(line.startswith("GPU") for line in listed.stdout.splitlines())


def compute_capability() -> str | None:
    """The first GPU's compute capability as nvidia-smi writes it ("9.0"), or None."""
    rows = smi_rows("compute_cap")
    return rows[0][0] if rows and rows[0] and rows[0][0] else None


def capability_number(arch: str) -> int:
    """90 for "sm_90", "9.0" or "sm_90a+PTX"."""
    return int("".join(ch for ch in arch.split("+")[0] if ch.isdigit()))


@dataclass(frozen=True)
class DeviceProperties:
    """What torch says of the first visible GPU."""

    name: str
    major: int
    minor: int
    sm_count: int
    total_memory: int
    max_threads_per_block: int
    shared_memory_per_block_optin: int
    warp_size: int


def first_device() -> DeviceProperties | None:
    """The GPU torch sees first (CUDA_VISIBLE_DEVICES applies), or None without one. Imports torch
    and creates no context beyond what `get_device_properties` needs."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return DeviceProperties(
        name=props.name,
        major=props.major,
        minor=props.minor,
        sm_count=props.multi_processor_count,
        total_memory=props.total_memory,
        max_threads_per_block=getattr(props, "max_threads_per_block", 1024) or 1024,
        shared_memory_per_block_optin=getattr(props, "shared_memory_per_block_optin", 0) or 0,
        warp_size=getattr(props, "warp_size", 32) or 32,
    )

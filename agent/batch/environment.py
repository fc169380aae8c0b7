"""What a run records about where it ran: versions of the pieces and the GPUs it used."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from agent import __version__
from agent.batch.config import BatchConfig
from agent.gpus import smi_rows
from sandbox.workers.gpu.gpu_gate import physical_gpu

_REPO = Path(__file__).resolve().parents[2]


def versions(config: BatchConfig) -> dict[str, Any]:
    found: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    for package in ("kernel-agent", "torch", "pydantic", *(["ray"] if config.executor == "ray" else [])):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    if found["kernel-agent"] is None:  # run from a copy of the source tree (a GPU machine's PYTHONPATH)
        found["kernel-agent"] = f"{__version__} (not installed)"
    found["git_sha"] = _git_sha()
    found["executable"] = sys.executable
    return found


def gpu_inventory(gpus: list[str]) -> list[dict[str, Any]]:
    """Name and UUID of each GPU the batch uses, from nvidia-smi (no CUDA context is created)."""
    rows: dict[str, dict[str, str]] = {}
    for parts in (smi_rows("index", "name", "uuid", "memory.total") or []) if gpus else []:
        if len(parts) == 4:
            rows[parts[0]] = {"name": parts[1], "uuid": parts[2], "memory": parts[3]}
    return [{"id": g, "physical": physical_gpu(g), **rows.get(physical_gpu(g), {})} for g in gpus]


def _git_sha() -> str | None:
    if not (_REPO / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None

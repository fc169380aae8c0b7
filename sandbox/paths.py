"""Where the harness keeps its files on the host: the build cache every sandbox may write, and the
harness's own state beside it, which no sandbox can write (baselines, the judge's caches, the GPU
gates). Both live under one cache root; agent/ and the sandbox backends take them from here."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """KERNEL_AGENT_CACHE, else $XDG_CACHE_HOME/kernel-agent or ~/.cache/kernel-agent."""
    root = os.environ.get("KERNEL_AGENT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernel-agent"
    )
    return Path(root)


def default_cache_dir() -> Path:
    """The build cache sandboxes share and may write (builds, toolchain, torch extensions):
    KERNEL_AGENT_BUILD_CACHE, else `<cache root>/sandbox`. Never point it at the harness's state."""
    override = os.environ.get("KERNEL_AGENT_BUILD_CACHE")
    return Path(override) if override else cache_root() / "sandbox"


def harness_state_dir() -> Path:
    """The harness's own state (baselines, the judge's inductor cache, GPU gates, experience):
    beside the sandbox cache, never inside it, so no candidate can write what the referee reads."""
    return cache_root() / "harness"


def bytecode_cache_dir() -> Path | None:
    """Where the harness keeps torch's bytecode for the local sandbox's workers (read-only to
    them): KERNEL_AGENT_BYTECODE_CACHE (`off`: none), else `<harness state>/bytecode`."""
    override = os.environ.get("KERNEL_AGENT_BYTECODE_CACHE")
    if override == "off":
        return None
    return Path(override) if override else harness_state_dir() / "bytecode"


def gpu_gate_dir() -> Path:
    """Where the GPU gate files live; sandboxes see this folder read-only (flock needs no write)."""
    return harness_state_dir() / "gpu-locks"

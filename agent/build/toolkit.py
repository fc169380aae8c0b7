"""The target GPU architecture, and (from the worker module) the CUDA toolkit and libraries.

Two traps seen on our machines: `nvcc` on PATH may be a wrapper script in /usr/local/bin,
so torch guesses CUDA_HOME=/usr/local and every build fails; and the toolkit may lack
cuBLAS/cuDNN, which then come from the nvidia-* wheels that torch installs.
"""

from __future__ import annotations

import re

from agent.gpus import compute_capability
from sandbox.workers.build.cuda_env import LinkLibrary, Toolkit, ToolkitError, find_toolkit, vendor_libraries

__all__ = [
    "KNOWN_ARCHES",
    "LinkLibrary",
    "Toolkit",
    "ToolkitError",
    "check_arch",
    "find_toolkit",
    "normalize_arch",
    "resolve_arch",
    "vendor_libraries",
    "visible_gpu_arch",
]

_ARCH = re.compile(r"^(?:sm_?|compute_?)?(\d+)\.?(\d)([af]?)$")


def normalize_arch(arch: str) -> str:
    """'sm_90', '9.0', '90', 'sm_90a' -> TORCH_CUDA_ARCH_LIST form ('9.0', '9.0a')."""
    match = _ARCH.match(arch.strip().lower())
    if not match:
        raise ToolkitError(
            f"--arch {arch!r} is not a CUDA architecture; use a form like sm_90, sm_90a or 9.0"
        )
    return f"{match.group(1)}.{match.group(2)}{match.group(3)}"


KNOWN_ARCHES = (
    "3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6",
    "8.7", "8.9", "9.0", "10.0", "10.1", "10.3", "10.7", "11.0", "12.0", "12.1",
)  # fmt: skip
"""Compute capabilities that torch's extension builder and nvcc know (torch.utils.cpp_extension's
supported list, without importing torch); an `a`/`f` suffix is accepted on any of them."""


def check_arch(arch: str) -> str:
    """`normalize_arch(arch)`, refusing an architecture no toolkit builds for (sm_999)."""
    value = normalize_arch(arch)
    if value.rstrip("af") not in KNOWN_ARCHES:
        known = ", ".join(f"sm_{a.replace('.', '')}" for a in KNOWN_ARCHES if float(a) >= 7.0)
        raise ToolkitError(
            f"--arch {arch!r} is not a CUDA architecture the toolkit knows; use one of {known}"
        )
    return value


def visible_gpu_arch() -> str | None:
    """Compute capability of the first visible GPU (nvidia-smi: no torch import), or None."""
    capability = compute_capability()
    if capability is None:
        return None
    try:
        return normalize_arch(capability)
    except ToolkitError:
        return None


def resolve_arch(requested: str | None) -> tuple[str, str]:
    """(TORCH_CUDA_ARCH_LIST value, how it was chosen)."""
    if requested:
        return check_arch(requested), "--arch"
    gpu = visible_gpu_arch()
    if gpu:
        return gpu, "the visible GPU"
    return "9.0", "no GPU visible: defaulting to sm_90 (H100/H200); pass --arch to change"

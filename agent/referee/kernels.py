"""Which profiled kernels are the candidate's own: the `__global__` functions in its sources."""

from __future__ import annotations

import re
from collections.abc import Iterable

from agent.referee.results import KernelTime
from agent.workspace import Solution, Workspace
from sandbox.safe_files import read_text
from sandbox.workers.protocol import KernelRow

_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^()]*(?:\([^()]*\)[^()]*)*\)")
_GLOBAL = re.compile(r"__global__\b[^(;{}]*?(\w+)\s*\(")
_VENDOR = ("cublas", "cudnn", "cutlass", "xmma", "gemm", "gemv", "nvjet", "sm80_", "sm90_", "sm100_", "cufft")
_TORCH = ("at::native", "at::cuda", "elementwise_kernel", "reduce_kernel", "vectorized", "c10::")


def own_kernel_names(sources: Iterable[str]) -> set[str]:
    names: set[str] = set()
    for text in sources:
        names.update(match.group(1) for match in _GLOBAL.finditer(_LAUNCH_BOUNDS.sub(" ", text)))
    return names


def solution_sources(solution: Solution) -> list[str]:
    if isinstance(solution, Workspace):
        sources = [
            read_text(solution.root, p.relative_to(solution.root).as_posix()) for p in solution.sources()
        ]
        return [text for text in sources if text is not None] + [
            text for name, text in solution.model_files().items() if name.endswith((".cuh", ".h", ".hpp"))
        ]
    return list(solution.model_files().values())  # load_inline sources live in the .py as strings


def kernel_base_name(profiled: str) -> str:
    """'void ns::relu_kernel<float>(float const*, float*, long)' -> 'relu_kernel'."""
    name = profiled.strip()
    if name.startswith("_Z"):
        return _demangled_last_name(name)
    name = re.sub(r"^(?:void|static|__global__)\s+", "", name)
    # A kernel in an unnamed namespace (the template library's) demangles with parentheses first.
    name = name.replace("(anonymous namespace)::", "")
    depth, cut = 0, len(name)
    for index, char in enumerate(name):  # drop template arguments and the parameter list
        if char == "<":
            if depth == 0:
                cut = min(cut, index)
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0:
            cut = min(cut, index)
            break
    return name[:cut].split("::")[-1].strip()


def _demangled_last_name(mangled: str) -> str:
    """The innermost name of an Itanium-mangled symbol (_Z3fooPf, _ZN2ns3fooEv)."""
    pos = 3 if mangled.startswith("_ZN") else 2
    last = mangled
    while pos < len(mangled) and mangled[pos].isdigit():
        digits = re.match(r"\d+", mangled[pos:])
        assert digits is not None
        start = pos + len(digits.group())
        last = mangled[start : start + int(digits.group())]
        pos = start + int(digits.group())
        if not mangled.startswith("_ZN"):
            break
    return last


def kernel_origin(profiled: str, own: set[str]) -> str:
    if kernel_base_name(profiled) in own:
        return "own"
    lowered = profiled.lower()
    if lowered.startswith(("memcpy", "memset")):
        return "memory"
    if "triton" in lowered:
        return "triton"
    if any(word in lowered for word in _VENDOR):
        return "vendor"
    if any(word in profiled for word in _TORCH):
        return "torch"
    return "other"


def kernel_breakdown(
    raw: list[KernelRow], calls: int, own: set[str]
) -> tuple[list[KernelTime], float | None]:
    """Per-forward kernel times, largest first, and the share of device time in own kernels."""
    total = sum(float(us) for _name, _count, us in raw)
    rows = [
        KernelTime(
            name=str(name),
            calls=count / max(calls, 1),
            time_us=float(us) / max(calls, 1),
            share=float(us) / total if total > 0 else 0.0,
            origin=kernel_origin(str(name), own),  # type: ignore[arg-type]
        )
        for name, count, us in raw
    ]
    rows.sort(key=lambda row: row.time_us, reverse=True)
    own_share = sum(row.share for row in rows if row.own) if total > 0 else None
    return rows, own_share

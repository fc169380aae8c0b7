"""The build toolchain, prepared once per (torch, CUDA, flags, arch) and shared by all builds
(torch + stdlib only).

Preparing it imports torch once to let `torch.utils.cpp_extension` write its ninja variables
and rules (include paths, ABI defines, link flags), and precompiles the torch headers a lean
binding includes. Every workspace build after that writes its build.ninja from the saved
header without importing torch, and its C++ files parse the torch headers from the
precompiled header instead of from source: the ~10 s a binding file costs drops to ~1-2 s.
If the precompiled header cannot be built or is rejected, g++ silently parses the header
text instead: slower, never wrong.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from protocol import WorkspaceBuildSpec

PCH_HEADER = "kernel_agent_torch.h"
PCH_SOURCE = """\
// The headers a lean binding uses, precompiled once per toolchain.
#pragma once
#include <pybind11/pybind11.h>
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>
"""
_TOOLCHAIN_KEYS = ("name", "cflags", "cuda_cflags", "ldflags", "include_dirs")


def toolchain_hash(spec: WorkspaceBuildSpec) -> str:
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "unknown"
    identity = {k: spec.get(k) for k in _TOOLCHAIN_KEYS}
    identity.update(
        arch=os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
        cuda_home=os.environ.get("CUDA_HOME", ""),
        torch=torch_version,
        python=sys.version,
        pch=PCH_SOURCE,
        layout=2,  # bump when what prepare() writes changes, so old toolchains are not reused
    )
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def prepare(spec: WorkspaceBuildSpec, toolchain_dir: Path) -> tuple[str, bool, str]:
    """(ninja header text, whether the PCH is usable, log). Caller holds the directory lock."""
    header_path = toolchain_dir / "header.ninja"
    if header_path.is_file():
        return header_path.read_text(), (toolchain_dir / f"{PCH_HEADER}.gch").is_file(), ""
    toolchain_dir.mkdir(parents=True, exist_ok=True)
    header = _torch_ninja_header(spec, toolchain_dir)
    pch_ok, log = _build_pch(header, toolchain_dir)
    header_path.write_text(header)  # written last: its presence means "prepared"
    return header, pch_ok, log


def _torch_ninja_header(spec: WorkspaceBuildSpec, toolchain_dir: Path) -> str:
    from torch.utils import cpp_extension

    probe = toolchain_dir / "probe.ninja"
    write = cpp_extension._write_ninja_file_to_build_library  # no public API writes only the file
    arguments = {
        "path": str(probe),
        "name": spec["name"],
        "sources": [str(toolchain_dir / "probe.cpp"), str(toolchain_dir / "probe.cu")],
        "extra_cflags": spec.get("cflags", []),
        "extra_cuda_cflags": spec.get("cuda_cflags", []),
        "extra_sycl_cflags": [],
        "extra_ldflags": spec.get("ldflags", []),
        "extra_include_paths": spec.get("include_dirs", []),
        "with_cuda": True,
        "with_sycl": False,
        "is_standalone": False,
    }
    # torch adds its own libraries (-lc10 -ltorch_cpu ... -lcudart) in _prepare_ldflags, which
    # its builder calls before writing the file; so must we, or imports fail on missing symbols.
    prepare_ldflags = cpp_extension._prepare_ldflags
    ldflag_arguments = {
        "extra_ldflags": list(spec.get("ldflags", [])),
        "with_cuda": True,
        "with_sycl": False,
        "verbose": False,
        "is_standalone": False,
    }
    arguments["extra_ldflags"] = prepare_ldflags(**_accepted(prepare_ldflags, ldflag_arguments))
    write(**_accepted(write, arguments))
    lines = probe.read_text().splitlines()
    first_build = next(i for i, line in enumerate(lines) if line.startswith("build "))
    probe.unlink()
    return "\n".join(lines[:first_build]).rstrip() + "\n"


def _accepted(function: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments `function` takes: these private helpers gain parameters across torch versions."""
    names = inspect.signature(function).parameters
    return {k: v for k, v in arguments.items() if k in names}


def _build_pch(header: str, toolchain_dir: Path) -> tuple[bool, str]:
    (toolchain_dir / PCH_HEADER).write_text(PCH_SOURCE)
    pch_ninja = toolchain_dir / "pch.ninja"
    pch_ninja.write_text(
        header
        + "\nrule pch\n  command = $cxx -x c++-header $cflags -c $in -o $out $post_cflags\n"
        + f"\nbuild {PCH_HEADER}.gch: pch {toolchain_dir / PCH_HEADER}\n"
    )
    proc = subprocess.run(
        ["ninja", "-v", "-f", str(pch_ninja), "-C", str(toolchain_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc.returncode == 0, proc.stdout


def workspace_ninja(header: str, pch_dir: Path | None, name: str, sources: list[str]) -> str:
    """build.ninja for one workspace: the toolchain header, then one build line per source."""
    lines = []
    for line in header.splitlines():
        if pch_dir is not None and line.startswith("cflags = "):
            line += f" -include {pch_dir / PCH_HEADER} -Winvalid-pch"
        lines.append(line)
    objects = []
    for source in sources:
        stem = Path(source).stem
        is_cuda = source.endswith(".cu")
        obj = f"{stem}.cuda.o" if is_cuda else f"{stem}.o"
        objects.append(obj)
        lines.append(f"build {obj}: {'cuda_compile' if is_cuda else 'compile'} {source}")
    lines.append(f"build {name}.so: link {' '.join(objects)}")
    lines.append(f"default {name}.so")
    return "\n".join(lines) + "\n"

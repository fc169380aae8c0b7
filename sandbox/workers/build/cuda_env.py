"""Find the CUDA toolkit and the vendor libraries to link (stdlib only: runs in workers too).

Two traps seen on our machines: `nvcc` on PATH may be a wrapper script in /usr/local/bin,
so torch guesses CUDA_HOME=/usr/local and every build fails; and the toolkit may lack
cuBLAS/cuDNN, which then come from the nvidia-* wheels that torch installs.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class ToolkitError(RuntimeError):
    pass


@dataclass(frozen=True)
class Toolkit:
    cuda_home: str
    found_by: str
    nvcc_version: str


@dataclass(frozen=True)
class LinkLibrary:
    name: str
    include_dir: str | None
    lib_dir: str
    link_flag: str


@functools.cache
def find_toolkit() -> Toolkit:
    """CUDA_HOME if set, else the toolkit `nvcc` really runs, else the usual install paths."""
    candidates: list[tuple[str, str]] = []
    if os.environ.get("CUDA_HOME"):
        candidates.append((os.environ["CUDA_HOME"], "CUDA_HOME"))
    if os.environ.get("CUDA_PATH"):
        candidates.append((os.environ["CUDA_PATH"], "CUDA_PATH"))
    real = _toolkit_nvcc_runs()
    if real:
        candidates.append((real, "the toolkit nvcc on PATH runs"))
    candidates += [("/usr/local/cuda", "default path"), ("/opt/cuda", "default path")]
    for home, how in candidates:
        nvcc = Path(home) / "bin" / "nvcc"
        if nvcc.is_file() and (Path(home) / "include" / "cuda_runtime.h").is_file():
            return Toolkit(
                cuda_home=str(Path(home).resolve()), found_by=how, nvcc_version=_nvcc_version(nvcc)
            )
    tried = ", ".join(home for home, _ in candidates)
    raise ToolkitError(f"no CUDA toolkit found (tried {tried}); install one or set CUDA_HOME to its folder")


def _toolkit_nvcc_runs() -> str | None:
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return None
    # `nvcc --dryrun` prints `#$ TOP=<toolkit>/bin/..` whatever wrapper launched it.
    try:
        out = subprocess.run(
            [nvcc, "--dryrun", "-c", "-x", "cu", "/dev/null", "-o", "/dev/null"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith("#$ TOP="):
            return str(Path(line.split("=", 1)[1].strip()).resolve())
    return str(Path(nvcc).resolve().parent.parent)


def _nvcc_version(nvcc: Path) -> str:
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else "unknown"


@functools.cache
def vendor_libraries() -> list[LinkLibrary]:
    """cuBLAS and cuDNN, from the toolkit or else from torch's nvidia-* wheels."""
    found: list[LinkLibrary] = []
    toolkit_home = Path(find_toolkit().cuda_home)
    wheel_roots = _nvidia_wheel_roots()
    for name, header, stem in (
        ("cublas", "cublas_v2.h", "libcublas.so"),
        ("cudnn", "cudnn.h", "libcudnn.so"),
    ):
        for include, lib in [(toolkit_home / "include", toolkit_home / "lib64"), *wheel_roots]:
            libs = sorted(lib.glob(f"{stem}*")) if lib.is_dir() else []
            if not libs:
                continue
            exact = lib / stem
            flag = f"-l{name}" if exact.exists() else f"-l:{libs[0].name}"
            has_header = (include / header).is_file()
            found.append(
                LinkLibrary(
                    name=name,
                    include_dir=str(include) if has_header else None,
                    lib_dir=str(lib),
                    link_flag=flag,
                )
            )
            break
    return found


def _nvidia_wheel_roots() -> list[tuple[Path, Path]]:
    try:
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    roots: list[tuple[Path, Path]] = []
    for base in map(Path, spec.submodule_search_locations):
        for sub in sorted(base.iterdir()):
            if (sub / "lib").is_dir():
                roots.append((sub / "include", sub / "lib"))
    return roots

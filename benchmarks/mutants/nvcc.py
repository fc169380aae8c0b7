"""Compile one mutated source to an object file with the toolkit's nvcc (no GPU needed): whether a
mutant is well-formed before the referee spends a GPU evaluation on it."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel

from benchmarks.mutants.operators import Mutant
from sandbox.workers.build.cuda_env import find_toolkit, vendor_libraries

REPO = Path(__file__).resolve().parents[2]


class CompileOutcome(BaseModel):
    ok: bool
    first_error: str = ""


def compile_mutant(mutant: Mutant, timeout_s: float = 300, folder: Path | None = None) -> CompileOutcome:
    """`nvcc -c` of the mutant with its own folder's headers (`folder`: where its source lives, by
    default the repository's `mutant.file`; a rendered template's `kernels/`), the toolkit's and
    cuBLAS/cuDNN's include folders."""
    nvcc = str(Path(find_toolkit().cuda_home) / "bin" / "nvcc")
    original = REPO / mutant.file
    includes = [folder or original.parent] + [
        Path(lib.include_dir) for lib in vendor_libraries() if lib.include_dir
    ]
    with tempfile.TemporaryDirectory(prefix="mutant-") as folder:
        source = Path(folder) / original.name
        source.write_text(mutant.text)
        command = [nvcc, "-c", "-std=c++17", "-o", str(Path(folder) / "mutant.o"), str(source)]
        command += [f"-I{path}" for path in includes]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode == 0:
        return CompileOutcome(ok=True)
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    return CompileOutcome(ok=False, first_error=(errors or done.stderr.splitlines() or ["nvcc failed"])[0])

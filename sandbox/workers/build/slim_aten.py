"""A generation's own `ATen/Functions.h`: torch's, with only the operators it can name (stdlib only).

`torch/types.h`, which load_inline puts at the top of every .cu, includes `ATen/Functions.h`,
and that includes the declarations of all ~1,350 ATen operators: about half of what nvcc's
three front ends (cudafe++, cicc, and the host compiler) parse for a typical generation. Code can
only call an operator it names, so a generation is compiled against a copy of that header, put
first on the include path, that keeps every line of torch's but the `#include <ATen/ops/NAME.h>`
lines of operators named nowhere in:

- the generation's sources (every identifier, qualified or not: `torch::empty`, `empty_like(x)`),
- the torch headers that types.h and the sources' own `#include`s bring in (operators they call
  qualified, `at::scalar_tensor`, found by preprocessing them once per include set and torch),
- the few inline functions of Functions.h itself (`at::var`, `at::std`, ...).

Declarations of operators nobody names cannot change what compiles or which overload is chosen,
except through argument-dependent lookup of a name the sources spell, which the first rule keeps.
A build that still fails is built again against torch's own headers (inline_build.unlean).

The same folder holds `kernel_agent_torch.h` for the first build tier (min_header): torch's own
`torch/types.h` with `ATen/ATen.h` narrowed to the headers kernel code uses (the Tensor class,
operators, dispatch macros, device guards). ATen.h's other headers (IValue, the JIT type system,
every operator's native declaration, TensorIndexing, the op registry of torch/library.h) are
what nvcc's front ends spend most of their time on (measured: host cudafe++ 8.0 -> 5.3 s, host
compile 6.8 -> 4.7 s). torch's autograd factories (`torch::empty` making a variable) stay when the
sources name `requires_grad`, the one option by which they differ from the `at::` factories that
`using namespace at` otherwise resolves `torch::empty` to.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

FUNCTIONS_H = Path("ATen") / "Functions.h"
_OP_INCLUDE = re.compile(r"^\s*#include <ATen/ops/(\w+)\.h>\s*$")
_QUALIFIED = re.compile(r"\b(?:at|torch)::(?:symint::)?([A-Za-z_]\w*)")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_SOURCE_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"][^>\"]+[>\"]", re.MULTILINE)
_ALWAYS = ("var", "var_mean", "std", "std_mean")  # Functions.h's own inline functions call these
SLIM_DIR = "kernel_agent_aten"  # in the build folder: -I here comes before torch's -isystem
MIN_HEADER = "kernel_agent_torch.h"
TYPES_H = Path("torch") / "types.h"
_ATEN_ALL = "#include <ATen/ATen.h>"
_MIN_ATEN = (
    "#include <ATen/core/Tensor.h>",
    "#include <ATen/Functions.h>",
    "#include <ATen/TensorOperators.h>",
    "#include <ATen/ScalarOps.h>",
    "#include <ATen/Dispatch.h>",
    "#include <ATen/DeviceGuard.h>",
    "#include <ATen/core/Generator.h>",
    "#include <c10/core/TensorOptions.h>",
    "#include <c10/util/Exception.h>",
)
_AUTOGRAD = (
    "#include <torch/csrc/autograd/generated/variable_factories.h>",
    "#include <torch/csrc/autograd/variable.h>",
)
_LIBRARY = "#include <torch/library.h>"


def torch_functions_h(include_dirs: list[str]) -> Path | None:
    for folder in include_dirs:
        candidate = Path(folder) / FUNCTIONS_H
        if candidate.is_file():
            return candidate
    return None


def torch_types_h(include_dirs: list[str]) -> Path | None:
    for folder in include_dirs:
        candidate = Path(folder) / TYPES_H
        if candidate.is_file():
            return candidate
    return None


def min_header(types_h: str, sources: list[str]) -> str | None:
    """torch's types.h with ATen.h narrowed (module docstring); None when it is not laid out as
    expected (another torch): the tier is then skipped."""
    lines = types_h.splitlines()
    if _ATEN_ALL not in (line.strip() for line in lines):
        return None
    keep_autograd = any(re.search(r"\brequires_grad\b", text) for text in sources)
    out: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped == _ATEN_ALL:
            out.extend(_MIN_ATEN)
        elif stripped == _LIBRARY or (stripped in _AUTOGRAD and not keep_autograd):
            continue
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def operator_names(functions_h: str) -> set[str]:
    return {m.group(1) for line in functions_h.splitlines() if (m := _OP_INCLUDE.match(line))}


# Put where the operator includes begin: a no-op cudafe++ passes through, so the host compile
# can tell where generations part ways (host_pch.py); the rest of the file is torch's, in order.
OPERATORS_BEGIN = (
    "#pragma GCC diagnostic push",
    '#pragma GCC diagnostic ignored "-Wunused-macros"',
    "#pragma GCC diagnostic pop",
)


def slim_text(functions_h: str, keep: set[str]) -> str:
    """torch's Functions.h without the operator includes outside `keep`, OPERATORS_BEGIN before
    the first."""
    lines: list[str] = []
    marked = False
    for line in functions_h.splitlines():
        op = _OP_INCLUDE.match(line)
        if op and not marked:
            lines.extend(OPERATORS_BEGIN)
            marked = True
        if not op or op.group(1) in keep:
            lines.append(line)
    return "\n".join(lines) + "\n"


def source_includes(sources: list[str]) -> list[str]:
    """The `#include` lines of the sources, deduplicated and sorted: what their headers need."""
    return sorted({m.group(0).strip() for text in sources for m in _SOURCE_INCLUDE.finditer(text)})


def header_operators(
    nvcc_command: str,
    functions_h: Path,
    includes: list[str],
    cache_dir: Path,
    prelude: str = "#include <torch/types.h>",
    headers: dict[str, str] | None = None,
) -> set[str] | None:
    """Operators the headers themselves call qualified: a fixed point over preprocessing the
    prelude and include lines (as nvcc does for the host, `nvcc_command` with the build's flags)
    against a slim Functions.h that grows until nothing new is named. `headers` (name -> text)
    are written beside that Functions.h first (the min tier's own header). Cached in `cache_dir`
    per (command, torch's Functions.h, prelude, headers, include lines). None when
    preprocessing fails."""
    text = functions_h.read_text()
    ops = operator_names(text)
    headers = headers or {}
    key_parts = [nvcc_command, text, includes, prelude, sorted(headers.items())]
    key = hashlib.sha256(json.dumps(key_parts).encode()).hexdigest()[:24]
    cached = cache_dir / f"{key}.json"
    if cached.is_file():
        return set(json.loads(cached.read_text()))
    work = cache_dir / f"{key}.probe"
    shadow = work / SLIM_DIR
    (shadow / FUNCTIONS_H).parent.mkdir(parents=True, exist_ok=True)
    for name, header in headers.items():
        (shadow / name).write_text(header)
    program = work / "headers.cu"
    program.write_text("\n".join([prelude, *includes]) + "\n")
    keep = set(_ALWAYS)
    for _ in range(4):
        (shadow / FUNCTIONS_H).write_text(slim_text(text, keep))
        proc = subprocess.run(
            f"{nvcc_command} -I{shadow} -E {program}",
            shell=True,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            (work / "failed.log").write_text(proc.stderr[-20000:])
            return None
        grown = keep | ({m.group(1) for m in _QUALIFIED.finditer(proc.stdout)} & ops)
        if grown == keep:
            break
        keep = grown
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(json.dumps(sorted(keep)))
    tmp.replace(cached)
    return keep


def needed_operators(sources: list[str], ops: set[str], from_headers: set[str]) -> set[str]:
    named = {token for text in sources for token in _IDENTIFIER.findall(text)}
    return (named & ops) | from_headers | set(_ALWAYS)

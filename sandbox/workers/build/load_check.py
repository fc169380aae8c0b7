"""Prove a built workspace loads, without a GPU (torch + stdlib only).

Python dlopens an extension with every symbol bound (RTLD_NOW), so importing it catches a binding
that calls a launcher no source defines. Then model_new.py is imported against that module and
ModelNew is made on the meta device (no memory, no kernels) beside the reference Model, so a
state_dict that verify could not load is found here. Errors are written as compiler lines
(`file:line: error: ...`), which the host's log parser already reads; a step that cannot run
here (no reference.py, a constructor that needs a GPU) is skipped with a note.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

_UNDEFINED_SYMBOL = re.compile(r"undefined symbol: (?P<sym>\S+)")
# torch's own words for "there is no GPU here" (a module-level tensor made on "cuda").
_NEEDS_GPU = re.compile(
    r"NVIDIA driver|CUDA driver|CUDA GPUs|CUDA-capable|compiled with CUDA|cudaGetDeviceCount|CUDA error"
)


@dataclass
class LoadReport:
    errors: list[str] = field(default_factory=list)  # compiler-style lines for the host's parser
    notes: list[str] = field(default_factory=list)  # steps skipped, in one line each


def check(module_path: str, name: str, sources: list[str], entry: str, reference: str | None) -> LoadReport:
    report = LoadReport()
    extension = _import_extension(module_path, name, sources, report)
    if extension is None:
        return report
    sys.modules[name] = extension
    _offline_hub(entry, reference)
    model_new = _import_entry(entry, report)
    if model_new is None:
        return report
    _check_state(model_new, entry, reference, report)
    return report


def _import_extension(module_path: str, name: str, sources: list[str], report: LoadReport) -> Any:
    import torch  # noqa: F401  the extension links libtorch: its symbols must be loaded first

    try:
        spec = importlib.util.spec_from_file_location(name, module_path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {module_path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    except Exception as exc:
        found = _UNDEFINED_SYMBOL.search(str(exc))
        if found is None:
            report.errors.append(f"ImportError: the built extension does not load: {exc}")
            return None
        mangled = found.group("sym")
        readable = demangle(mangled)
        where = referencing_line(readable, sources)
        what = (
            f"undefined symbol {readable}: the extension does not load (no source defines it; "
            'define it in a kernels/*.cu with the same signature, extern "C" on both sides, '
            "or call a launcher that exists)"
        )
        report.errors.append(
            f"{where[0]}:{where[1]}: error: {what}" if where else f"undefined symbol: {readable}"
        )
        return None


def demangle(symbol: str) -> str:
    tool = shutil.which("c++filt")
    if tool is None:
        return symbol
    try:
        out = subprocess.run([tool, symbol], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return symbol
    return out.stdout.strip() or symbol


def referencing_line(readable: str, sources: list[str]) -> tuple[str, int] | None:
    """The first line of a source that calls `readable`'s function (a declaration is only a
    fallback): where the model must look."""
    base = readable.split("(", 1)[0].split("::")[-1].strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", base):
        return None
    call = re.compile(rf"\b{base}\s*\(")
    declaration = re.compile(rf"^\s*(?:extern\s+\"C\"\s*)?(?:[A-Za-z_][\w:<>]*[\s*&]+)+{base}\s*\(")
    fallback = None
    for source in sorted(sources, key=lambda s: not s.endswith(".cpp")):
        try:
            with open(source, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for number, line in enumerate(lines, 1):
            if not call.search(line):
                continue
            if not declaration.match(line):
                return source, number
            fallback = fallback or (source, number)
    return fallback


def _offline_hub(*paths: str | None) -> None:
    """Models loaded by name (level-4 tasks, and a ModelNew that wraps one) come from the shipped
    configs: there is no network here. (build.py, the one importer, has put tasks/ on the path.)"""
    import hub_offline

    for path in paths:
        if path and os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as handle:
                hub_offline.prepare(handle.read())


def _import_entry(entry: str, report: LoadReport) -> Any:
    if not os.path.isfile(entry):
        report.errors.append(
            "FileNotFoundError: the workspace has no model_new.py; write it with class ModelNew(nn.Module)"
        )
        return None
    spec = importlib.util.spec_from_file_location("kernel_agent_model_new", entry)
    if spec is None or spec.loader is None:
        report.errors.append(f"{entry}:1: error: cannot be imported")
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # model code: SystemExit included
        if _gpu_only(exc):
            report.notes.append(f"model_new.py needs a GPU to import ({_one_line(exc)}); not checked here")
            return None
        report.errors.append(f"{entry}:{_line_in(exc, entry)}: error: {_one_line(exc)}")
        return None
    model_class = module.__dict__.get("ModelNew")
    import torch

    if not (isinstance(model_class, type) and issubclass(model_class, torch.nn.Module)):
        report.errors.append(f"{entry}:1: error: model_new.py defines no class ModelNew(nn.Module)")
        return None
    return model_class


def _check_state(model_class: type, entry: str, reference: str | None, report: LoadReport) -> None:
    import torch

    if reference is None or not os.path.isfile(reference):
        report.notes.append("no reference.py here: ModelNew's parameters were not compared with Model's")
        return
    try:
        namespace: dict[str, Any] = {"__name__": "kernel_agent_reference", "__file__": reference}
        with open(reference, encoding="utf-8") as handle:
            exec(compile(handle.read(), reference, "exec"), namespace)
        with torch.device("meta"):
            init_inputs = list(namespace["get_init_inputs"]())
            expected = _shapes(namespace["Model"](*copy.deepcopy(init_inputs)))
    except BaseException as exc:
        report.notes.append(
            f"the reference Model cannot be made on the meta device ({_one_line(exc)}): "
            "ModelNew's parameters were not compared with Model's"
        )
        return
    try:
        with torch.device("meta"):
            got = _shapes(model_class(*copy.deepcopy(init_inputs)))
    except BaseException as exc:
        if isinstance(exc, TypeError) and re.search(r"positional argument|keyword argument", str(exc)):
            report.errors.append(
                f"{entry}:{_class_line(model_class)}: error: ModelNew(*get_init_inputs()) fails: "
                f"{_one_line(exc)}; ModelNew takes the same arguments as the reference Model"
            )
        else:
            report.notes.append(
                f"ModelNew cannot be made on the meta device ({_one_line(exc)}): its parameters "
                "were not compared with Model's here (verify does)"
            )
        return
    problem = state_mismatch(expected, got)
    if problem:
        report.errors.append(f"{entry}:{_class_line(model_class)}: error: {problem}")


def _shapes(model: Any) -> dict[str, tuple[int, ...]]:
    return {key: tuple(value.shape) for key, value in model.state_dict().items()}


def state_mismatch(expected: dict[str, tuple[int, ...]], got: dict[str, tuple[int, ...]]) -> str:
    """What verify's load of the reference's state_dict into ModelNew would fail on, or ""."""
    if not expected:
        return ""
    missing = sorted(set(expected) - set(got))
    unexpected = sorted(set(got) - set(expected))
    shapes = [
        f"{key} is {list(got[key])} in ModelNew, {list(expected[key])} in Model"
        for key in sorted(set(expected) & set(got))
        if expected[key] != got[key]
    ]
    parts = (
        ([f"missing {missing}"] if missing else [])
        + ([f"unexpected {unexpected}"] if unexpected else [])
        + shapes
    )
    if not parts:
        return ""
    return (
        "ModelNew's state_dict does not match the reference Model's: "
        + "; ".join(parts)
        + ". verify loads Model's weights into ModelNew by name: keep the reference's parameter "
        "and buffer names and shapes"
    )


def _gpu_only(exc: BaseException) -> bool:
    import torch

    return not torch.cuda.is_available() and bool(_NEEDS_GPU.search(str(exc)))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _line_in(exc: BaseException, path: str) -> int:
    """The deepest line of `path` in the exception's traceback (a SyntaxError's own line)."""
    if isinstance(exc, SyntaxError) and exc.filename == path and exc.lineno:
        return exc.lineno
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == path and f.lineno]
    return lines[-1] if lines else 1


def _class_line(model_class: type) -> int:
    try:
        return inspect.getsourcelines(model_class)[1]
    except (OSError, TypeError):
        return 1

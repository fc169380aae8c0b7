"""Instantiate KernelBench-style task files and report their input specs (torch + stdlib only).

usage: python -I inspect_task.py TASK.py [TASK.py ...]

Each file runs in a fresh module namespace; a failure in one file is reported for that file
and the others go on. Inputs are built on the CPU from a fixed seed: only shapes and dtypes
are reported, never values.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from protocol import emit, stdout_to_stderr


def describe_value(value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return {
            "kind": "tensor",
            "shape": list(value.shape),
            "dtype": str(value.dtype).removeprefix("torch."),
            "device": value.device.type,
        }
    if isinstance(value, bool):
        return {"kind": "bool", "value": repr(value)}
    if isinstance(value, int):
        return {"kind": "int", "value": repr(value)}
    if isinstance(value, float):
        return {"kind": "float", "value": repr(value)}
    if value is None:
        return {"kind": "none"}
    if isinstance(value, list | tuple):
        return {"kind": type(value).__name__, "items": [describe_value(v) for v in value]}
    return {"kind": "other", "value": type(value).__name__}


def _short_error(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(frames):
        if frame.filename.endswith(".py") and "site-packages" not in frame.filename:
            where = f" (line {frame.lineno}, in {frame.name})"
            break
    return f"{type(exc).__name__}: {exc}{where}"


def inspect_file(path: str) -> dict[str, Any]:
    import runpy

    import torch

    result: dict[str, Any] = {"path": path, "ok": False}
    stage = "import"
    try:
        torch.manual_seed(0)
        namespace = runpy.run_path(path, run_name="__kernel_agent_task__")
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if name not in namespace:
                result["error"] = {"stage": "import", "message": f"it defines no `{name}`"}
                return result
        stage = "get_init_inputs"
        init_inputs = list(namespace["get_init_inputs"]())
        stage = "get_inputs"
        inputs = list(namespace["get_inputs"]())
        stage = "Model"
        model = namespace["Model"](*init_inputs)
        if not isinstance(model, torch.nn.Module):
            result["error"] = {"stage": stage, "message": "Model(...) is not a torch.nn.Module"}
            return result
        result.update(
            ok=True,
            inputs=[describe_value(v) for v in inputs],
            init_inputs=[describe_value(v) for v in init_inputs],
            parameters=sum(p.numel() for p in model.parameters()),
            buffers=sum(b.numel() for b in model.buffers()),
        )
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["error"] = {"stage": stage, "message": _short_error(exc)}
    return result


def main(paths: list[str]) -> None:
    results = []
    with stdout_to_stderr():
        for path in paths:
            results.append(inspect_file(path))
    emit({"tasks": results})


if __name__ == "__main__":
    main(sys.argv[1:])

"""Instantiate KernelBench-style task files and report their input specs (torch + stdlib only).

usage: python -I inspect_task.py [--timeout SECONDS] TASK.py [TASK.py ...]

torch is imported once; each file then runs in a forked child, so nothing one task does to
module or interpreter state (builtins, torch flags) reaches another, and a crash or hang
is that file's error alone. Inputs are built on the CPU from a fixed seed: only shapes and
dtypes are reported, never values.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
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


def inspect_in_child(path: str, timeout: float) -> dict[str, Any]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: run the task, write one JSON line, leave without cleanup handlers
        os.close(read_end)
        try:
            with stdout_to_stderr():
                payload = json.dumps(inspect_file(path))
        except BaseException as exc:
            payload = json.dumps(
                {"path": path, "ok": False, "error": {"stage": "import", "message": repr(exc)}}
            )
        os.write(write_end, payload.encode())
        os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_end], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return {
            "path": path,
            "ok": False,
            "error": {"stage": "timeout", "message": f"took longer than {timeout:.0f}s"},
        }
    try:
        return json.loads(b"".join(chunks))
    except json.JSONDecodeError:
        if os.WIFSIGNALED(status):
            why = f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            why = f"exited with status {os.WEXITSTATUS(status)} before reporting"
        return {"path": path, "ok": False, "error": {"stage": "crash", "message": why}}


def main(argv: list[str]) -> None:
    timeout = 300.0
    if argv[:1] == ["--timeout"]:
        timeout, argv = float(argv[1]), argv[2:]
    import torch  # noqa: F401 - imported once, before forking, so children start warm

    emit({"tasks": [inspect_in_child(path, timeout) for path in argv]})


if __name__ == "__main__":
    main(sys.argv[1:])

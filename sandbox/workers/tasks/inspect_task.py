"""Instantiate KernelBench-style task files and report their input specs (torch + stdlib only).

usage: python -I inspect_task.py [--timeout SECONDS] [--jobs N] TASK.py [TASK.py ...]

torch is imported once; each file then runs in a forked child, so nothing one task does to
module or interpreter state (builtins, torch flags) reaches another, and a crash or hang
is that file's error alone. Inputs are built on the meta device wherever the task allows (else
on the CPU, from a fixed seed): only shapes and dtypes are reported, never values. Up to
--jobs children run at once.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
import hub_offline
from protocol import ArgDescription, InspectResult, TaskFailed, TaskReport, emit, stdout_to_stderr
from task_error import short_error

META_FORWARD_S = 1.0
EXIT_POLL_S = 0.1


def describe_value(value: Any) -> ArgDescription:
    import torch

    if isinstance(value, torch.Tensor):
        return {
            "kind": "tensor",
            "shape": list(value.shape),
            "dtype": str(value.dtype).removeprefix("torch."),
            "device": "cpu" if value.device.type == "meta" else value.device.type,
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


def inspect_file(path: str) -> TaskReport:
    """Shapes and dtypes without work: the task's own get_inputs(), get_init_inputs() and Model()
    run with the meta device as the default device, so nothing is allocated (KernelBench's level-1
    inputs are 6 GB each). A task that cannot run on meta (it needs values: numpy, .item(), an
    explicit device) is run for real on the CPU instead, and the report says so."""
    import runpy

    import torch

    stage = "import"
    try:
        hub_offline.prepare(_source(path))
        torch.manual_seed(0)
        namespace = runpy.run_path(path, run_name="__kernel_agent_task__")
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if name not in namespace:
                return {
                    "path": path,
                    "ok": False,
                    "error": {"stage": "import", "message": f"it defines no `{name}`"},
                }
        try:
            with torch.device("meta"):
                init_inputs, inputs, model = _instantiate(namespace)
            built_on = "meta"
        except Exception as exc:
            meta_error = short_error(exc, limit=4000)
            torch.manual_seed(0)
            namespace = runpy.run_path(path, run_name="__kernel_agent_task__")
            stage = "get_init_inputs"
            init_inputs = _arguments(namespace, "get_init_inputs", "constructor")
            stage = "get_inputs"
            inputs = _arguments(namespace, "get_inputs", "forward")
            stage = "Model"
            model = namespace["Model"](*init_inputs)
            built_on = f"cpu (on meta: {meta_error})"
        if not isinstance(model, torch.nn.Module):
            return {
                "path": path,
                "ok": False,
                "error": {"stage": "Model", "message": "Model(...) is not a torch.nn.Module"},
            }
        return {
            "path": path,
            "ok": True,
            "inputs": [describe_value(v) for v in inputs],
            "init_inputs": [describe_value(v) for v in init_inputs],
            "parameters": sum(p.numel() for p in model.parameters()),
            "buffers": sum(b.numel() for b in model.buffers()),
            "built_on": built_on,
            "outputs": _meta_outputs(model, inputs) if built_on == "meta" else None,
        }
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = str(exc) if isinstance(exc, _NotArguments) else short_error(exc, limit=4000)
        if isinstance(exc, OSError) and exc.errno == errno.EFBIG:  # Python ignores SIGXFSZ
            message += ": it wrote a file past the sandbox's file-size limit (RLIMIT_FSIZE)"
        return {"path": path, "ok": False, "error": {"stage": stage, "message": message}}


def _source(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""  # runpy then reports why it cannot be read


class _OutOfTime(Exception):
    pass


def _meta_outputs(model: Any, inputs: list[Any]) -> list[ArgDescription] | None:
    """What forward returns, by shape and dtype, from a call on the meta device (no work, nothing
    allocated); None where the forward needs values (data-dependent shapes, .item()) or takes
    longer than META_FORWARD_S (recurrent nets unroll into thousands of ops: 5-11 s for
    KernelBench's LSTMs and GRUs)."""
    import torch

    def out_of_time(*_: object) -> None:
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, out_of_time)
    signal.setitimer(signal.ITIMER_REAL, META_FORWARD_S)
    try:
        with torch.no_grad(), torch.device("meta"):
            out = model(*inputs)
    except (Exception, _OutOfTime):
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return [describe_value(v) for v in (out if isinstance(out, list | tuple) else [out])]


class _NotArguments(Exception):
    """get_init_inputs() or get_inputs() returned something other than a list or tuple."""


def _arguments(namespace: dict[str, Any], name: str, what: str) -> list[Any]:
    value = namespace[name]()
    if not isinstance(value, list | tuple):
        raise _NotArguments(
            f"{name}() must return a list (or tuple) of {what} arguments; it returned {type(value).__name__}"
        )
    return list(value)


def _instantiate(namespace: dict[str, Any]) -> tuple[list[Any], list[Any], Any]:
    init_inputs = _arguments(namespace, "get_init_inputs", "constructor")
    inputs = _arguments(namespace, "get_inputs", "forward")
    return init_inputs, inputs, namespace["Model"](*init_inputs)


def _start_child(path: str) -> tuple[int, int]:
    """Fork a child that inspects `path` and writes one JSON document to the pipe it returns."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: run the task, write one JSON document, leave without cleanup handlers
        os.close(read_end)
        try:
            with stdout_to_stderr():
                payload = json.dumps(inspect_file(path))
        except BaseException as exc:
            failed: TaskFailed = {
                "path": path,
                "ok": False,
                "error": {"stage": "import", "message": repr(exc)},
            }
            payload = json.dumps(failed)
        os.write(write_end, payload.encode())
        os._exit(0)
    os.close(write_end)
    return read_end, pid


def _child_report(path: str, output: bytes, status: int) -> TaskReport:
    try:
        return json.loads(output)
    except json.JSONDecodeError:
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXFSZ:
            why = "killed by SIGXFSZ: it wrote a file past the sandbox's file-size limit (RLIMIT_FSIZE)"
        elif os.WIFSIGNALED(status):
            why = f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            why = f"exited with status {os.WEXITSTATUS(status)} before reporting"
        return {"path": path, "ok": False, "error": {"stage": "crash", "message": why}}


def _drain(pipe: int) -> bytes:
    """What is in `pipe` now, without waiting for more."""
    os.set_blocking(pipe, False)
    chunks = []
    while True:
        try:
            chunk = os.read(pipe, 1 << 16)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def inspect_all(paths: list[str], timeout: float, jobs: int) -> list[TaskReport]:
    """Each path in a forked child of its own, up to `jobs` at once (forked from this one thread)."""
    reports: list[TaskReport | None] = [None] * len(paths)
    waiting = list(range(len(paths)))
    running: dict[int, tuple[int, int, list[bytes], float]] = {}  # pipe -> (index, pid, output, deadline)
    while waiting or running:
        while waiting and len(running) < jobs:
            index = waiting.pop(0)
            pipe, pid = _start_child(paths[index])
            running[pipe] = (index, pid, [], time.monotonic() + timeout)
        wait = max(0.0, min(deadline for *_, deadline in running.values()) - time.monotonic())
        ready, _, _ = select.select(list(running), [], [], min(wait, EXIT_POLL_S))
        for pipe in ready:
            chunk = os.read(pipe, 1 << 16)
            if chunk:
                running[pipe][2].append(chunk)
                continue
            index, pid, output, _ = running.pop(pipe)
            os.close(pipe)
            _, status = os.waitpid(pid, 0)
            reports[index] = _child_report(paths[index], b"".join(output), status)
        for pipe, (index, pid, output, deadline) in list(running.items()):
            # A process the task started holds the pipe open after the child has reported and
            # exited: the report is whole in the pipe, so it is read without waiting for EOF.
            exited, status = os.waitpid(pid, os.WNOHANG)
            if exited:
                del running[pipe]
                reports[index] = _child_report(paths[index], b"".join(output) + _drain(pipe), status)
                os.close(pipe)
            elif time.monotonic() > deadline:
                del running[pipe]
                os.close(pipe)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                reports[index] = {
                    "path": paths[index],
                    "ok": False,
                    "error": {"stage": "timeout", "message": f"took longer than {timeout:.0f}s"},
                }
    return [report for report in reports if report is not None]


def main(argv: list[str]) -> None:
    timeout, jobs = 300.0, os.cpu_count() or 1
    while argv[:1] in (["--timeout"], ["--jobs"]):
        if argv[0] == "--timeout":
            timeout = float(argv[1])
        else:
            jobs = max(1, int(argv[1]))
        argv = argv[2:]
    import torch  # imported once, before forking, so children start warm

    # The first forward on meta imports torch's meta kernels and decompositions (0.65 s): once
    # here, not in every child.
    with torch.no_grad(), torch.device("meta"):
        torch.nn.Conv2d(3, 4, 3)(torch.empty(1, 3, 8, 8)).relu().sum()
    # transformers takes seconds to import: once here for every task that loads a model by name.
    for path in argv:
        hub_offline.prepare(_source(path))

    result: InspectResult = {"tasks": inspect_all(argv, timeout, jobs)}
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])

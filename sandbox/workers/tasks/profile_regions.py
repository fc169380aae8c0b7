"""Time a task's forward operator by operator with torch.profiler (torch + stdlib only).

usage: python -I profile_regions.py TASK.py [--device cuda|cpu] [--warmup N] [--iters N]

The task runs as the referee runs it: `Model(*get_init_inputs())` and `get_inputs()` made from a
fixed seed, moved to the device, warmed up, then timed. Every aten operator the forward dispatches
is wrapped in a `record_function` range named after its position, so the profiler attributes the
device kernels each operator launched to it (CPU time on the CPU). The harness joins the
operators to the traced op graph by their names and order. The forward's own time is the median
of `iters` timed calls (CUDA events on the GPU), without the profiler.
Result: {"ops": [{"op", "ms"}], "total_ms", "device", "iters"}.
"""

from __future__ import annotations

import os
import runpy
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
from protocol import emit, stdout_to_stderr
from task_error import short_error

PREFIX = "ka_op_"


def _to(value: Any, device: str) -> Any:
    import torch

    return value.to(device) if isinstance(value, torch.Tensor) else value


def _mode(names: list[str]) -> Any:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ranges(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            index = len(names)
            names.append(str(func))
            with torch.profiler.record_function(f"{PREFIX}{index}"):
                return func(*args, **(kwargs or {}))

    return Ranges()


def _event_ms(event: Any, device: str) -> float:
    if device == "cpu":
        return event.cpu_time_total / 1000.0
    for attribute in ("device_time_total", "cuda_time_total"):
        if hasattr(event, attribute):
            return getattr(event, attribute) / 1000.0
    return 0.0


def _timed_ms(model: Any, inputs: list[Any], device: str, iters: int) -> float:
    import torch

    times = []
    for _ in range(iters):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - began) * 1000.0)
    return statistics.median(times)


def profile(task_path: str, device: str, warmup: int, iters: int) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity

    task = runpy.run_path(task_path, run_name="__kernel_agent_task__")
    torch.manual_seed(0)
    model = task["Model"](*task["get_init_inputs"]()).to(device)
    inputs = [_to(v, device) for v in task["get_inputs"]()]
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        total_ms = _timed_ms(model, inputs, device, iters)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        names: list[str] = []
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(iters):
                names.clear()
                with _mode(names):
                    model(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
    per_op = [0.0] * len(names)
    for event in prof.key_averages():
        if event.key.startswith(PREFIX):
            index = int(event.key[len(PREFIX) :])
            if index < len(per_op):
                per_op[index] = _event_ms(event, device) / iters
    return {
        "ops": [{"op": name, "ms": ms} for name, ms in zip(names, per_op, strict=True)],
        "total_ms": total_ms,
        "device": device,
        "iters": iters,
    }


def main(argv: list[str]) -> None:
    options = {"--device": "cuda", "--warmup": "3", "--iters": "10"}
    paths = []
    while argv:
        head = argv.pop(0)
        if head in options and argv:
            options[head] = argv.pop(0)
        else:
            paths.append(head)
    try:
        with stdout_to_stderr():
            result = profile(paths[0], options["--device"], int(options["--warmup"]), int(options["--iters"]))
        result["ok"] = True
    except Exception as exc:
        result = {"ok": False, "error": short_error(exc)}
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])

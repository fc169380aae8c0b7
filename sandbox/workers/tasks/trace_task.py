"""Trace KernelBench-style tasks into small op graphs (torch + stdlib only).

usage: python -I trace_task.py [--timeout SECONDS] TASK.py [TASK.py ...]

Each file runs in a forked child (a crash or hang is that file's error alone). The task's
`get_init_inputs()`, `Model(...)` and `get_inputs()` run with `torch.device("meta")` as the
default device, so even a 6 GB input allocates nothing; `Model.forward` then runs under a
TorchDispatchMode that records every aten operator with its arguments, output shapes, strides
and dtypes, and which argument an operator returns a view of or writes into. Only when meta
fails is the task run for real on the CPU (inputs up to CPU_FALLBACK_BYTES), and the result
says so. The result is one JSON document: {"tasks": [graph or error per file]}.
"""

from __future__ import annotations

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
from protocol import emit, stdout_to_stderr
from task_error import short_error

CPU_FALLBACK_BYTES = 1 << 30


def _dtype(value: Any) -> str:
    return str(value).removeprefix("torch.")


def _tensor_info(t: Any) -> dict[str, Any]:
    return {
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "offset": int(t.storage_offset()),
        "dtype": _dtype(t.dtype),
    }


class Recorder:
    """Maps every tensor it has seen to a reference (input, parameter or node output)."""

    def __init__(self) -> None:
        self.refs: dict[int, dict[str, Any]] = {}
        self.keep: list[Any] = []  # holds every seen tensor so no id() is reused
        self.nodes: list[dict[str, Any]] = []

    def bind(self, tensor: Any, ref: dict[str, Any]) -> None:
        self.refs[id(tensor)] = ref
        self.keep.append(tensor)

    def arg(self, value: Any) -> dict[str, Any]:
        import torch

        if isinstance(value, torch.Tensor):
            ref = self.refs.get(id(value))
            if ref is None:  # a tensor made outside forward that is no parameter or buffer
                ref = {"t": "constant", **_tensor_info(value)}
                self.bind(value, ref)
            return ref
        if isinstance(value, list | tuple):
            return {"t": "list", "items": [self.arg(v) for v in value]}
        if value is None or isinstance(value, bool | int | float | str):
            return {"t": "const", "value": value}
        if isinstance(value, torch.dtype):
            return {"t": "const", "value": _dtype(value)}
        return {"t": "const", "value": str(value)}

    def record(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        import torch

        schema = func._schema
        node: dict[str, Any] = {
            "id": len(self.nodes),
            "op": str(func),
            "args": [self.arg(a) for a in args],
            "kwargs": {k: self.arg(v) for k, v in kwargs.items()},
            "outputs": [],
        }
        for i, argument in enumerate(schema.arguments):
            info = argument.alias_info
            if info is None or i >= len(args):
                continue
            if info.is_write:
                node.setdefault("mutates", []).append(i)
            else:
                node.setdefault("view_of", i)
        returns = [r.alias_info for r in schema.returns]
        outs = out if isinstance(out, list | tuple) else [out]
        for k, value in enumerate(outs):
            if isinstance(value, torch.Tensor):
                node["outputs"].append(_tensor_info(value))
                self.bind(value, {"t": "node", "id": node["id"], "out": k})
            else:
                node["outputs"].append(None)
        # An in-place operator (relu_, add_) returns the tensor it wrote: later uses of that
        # tensor mean this node's result. A write it does not return (batch norm's running
        # statistics) is a side effect on state and leaves the tensor's meaning alone.
        if returns and returns[0] is not None and returns[0].is_write and node.get("mutates"):
            node["writes"] = node["mutates"][0]
            target = args[node["writes"]]
            if isinstance(target, torch.Tensor):
                self.bind(target, {"t": "node", "id": node["id"], "out": 0})
        self.nodes.append(node)


def _make_mode(recorder: Recorder) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class TraceMode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            recorder.record(func, tuple(args), dict(kwargs), out)
            return out

    return TraceMode()


def _describe_input(recorder: Recorder, index: int, value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        recorder.bind(value, {"t": "input", "index": index})
        return {"index": index, "kind": "tensor", **_tensor_info(value)}
    if isinstance(value, bool | int | float) or value is None:
        return {"index": index, "kind": type(value).__name__, "value": value}
    return {"index": index, "kind": "other", "value": type(value).__name__}


def _nbytes(values: list[Any]) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def _build(namespace: dict[str, Any], device: str) -> tuple[Any, list[Any], list[Any]]:
    import torch

    torch.manual_seed(0)
    with torch.device(device):
        init_inputs = list(namespace["get_init_inputs"]())
        model = namespace["Model"](*init_inputs)
        inputs = list(namespace["get_inputs"]())
    if not isinstance(model, torch.nn.Module):
        raise TypeError("Model(...) is not a torch.nn.Module")
    return model, init_inputs, inputs


def _trace(model: Any, inputs: list[Any]) -> dict[str, Any]:
    import torch

    recorder = Recorder()
    described = [_describe_input(recorder, i, v) for i, v in enumerate(inputs)]
    params = []
    for name, p in model.named_parameters():
        recorder.bind(p, {"t": "param", "name": name})
        params.append({"name": name, "kind": "parameter", **_tensor_info(p)})
    for name, b in model.named_buffers():
        recorder.bind(b, {"t": "param", "name": name})
        params.append({"name": name, "kind": "buffer", **_tensor_info(b)})
    with torch.no_grad(), _make_mode(recorder):
        out = model(*inputs)
    outs = out if isinstance(out, list | tuple) else [out]
    return {
        "inputs": described,
        "params": params,
        "nodes": recorder.nodes,
        "outputs": [recorder.arg(o) for o in outs],
        "output_is_tuple": isinstance(out, list | tuple),
        "training": bool(model.training),
    }


def trace_file(path: str) -> dict[str, Any]:
    import runpy

    result: dict[str, Any] = {"path": path, "ok": False, "notes": []}
    stage = "import"
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            hub_offline.prepare(handle.read())
        namespace = runpy.run_path(path, run_name="__kernel_agent_task__")
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if name not in namespace:
                result["error"] = {"stage": "import", "message": f"it defines no `{name}`"}
                return result
        stage = "meta"
        try:
            model, _, inputs = _build(namespace, "meta")
            result.update(_trace(model, inputs), device="meta")
        except Exception as exc:
            reason = short_error(exc)
            stage = "cpu"
            model, _, inputs = _build(namespace, "cpu")
            size = _nbytes(inputs)
            if size > CPU_FALLBACK_BYTES:
                result["error"] = {
                    "stage": "meta",
                    "message": f"tracing on meta failed ({reason}) and the inputs ({size} bytes) are "
                    "too large to trace on the CPU",
                }
                return result
            result.update(_trace(model, inputs), device="cpu")
            result["notes"].append(f"traced on the CPU with real inputs: tracing on meta failed ({reason})")
        result["ok"] = True
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["error"] = {"stage": stage, "message": short_error(exc)}
    return result


def trace_in_child(path: str, timeout: float) -> dict[str, Any]:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: trace, write one JSON document, leave without cleanup handlers
        os.close(read_end)
        try:
            with stdout_to_stderr():
                payload = json.dumps(trace_file(path), default=str)
        except BaseException as exc:
            payload = json.dumps(
                {"path": path, "ok": False, "error": {"stage": "crash", "message": repr(exc)}}
            )
        data = payload.encode()
        while data:
            written = os.write(write_end, data)
            data = data[written:]
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
            "error": {"stage": "timeout", "message": f"took over {timeout:.0f}s"},
        }
    try:
        return json.loads(b"".join(chunks))
    except json.JSONDecodeError:
        if os.WIFSIGNALED(status):
            why = f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
        else:
            why = f"exited with status {os.WEXITSTATUS(status)} before reporting"
        return {"path": path, "ok": False, "error": {"stage": "crash", "message": why}}


def _warm_up() -> None:
    """Import torch and load its meta kernels once, before forking, so every child starts warm
    (the first meta operator of a process costs seconds)."""
    import torch

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        _trace(model, [torch.randn(2, 4)])


def main(argv: list[str]) -> None:
    timeout = 120.0
    if argv[:1] == ["--timeout"]:
        timeout, argv = float(argv[1]), argv[2:]
    _warm_up()
    for path in argv:  # transformers imported once, before forking, for tasks that load a model by name
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                hub_offline.prepare(handle.read())
        except OSError:
            pass  # the child reports why the file cannot be read
    emit({"tasks": [trace_in_child(path, timeout) for path in argv]})


if __name__ == "__main__":
    main(sys.argv[1:])

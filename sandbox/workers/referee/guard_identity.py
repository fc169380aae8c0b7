"""Identity snapshots of what the candidate worker's own checks and clocks call (torch + stdlib).

Taken before any candidate code is imported and compared after the trials and after timing:
a candidate that rebinds a clock (torch.cuda.Event.elapsed_time, time.perf_counter), a
comparator (torch.allclose), an op the reference uses (torch.relu, F.gelu), the reference
itself (Model.forward) or a task global (batch_size) shows up by name. Objects are held, not
their id(), so a freed object's id cannot be reused by an impostor. Native-level tampering
(GOT patches, /proc/self/mem) is out of its reach by design.
"""

from __future__ import annotations

import importlib
import types
from typing import Any

CRITICAL = [
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.monotonic",
    "time.time",
    "os.replace",
    "os.write",
    "os._exit",
    "json.dumps",
    "hmac.new",
    "hashlib.sha256",
    "random.seed",
    "random.Random",
    "torch.cuda.Event",
    "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize",
    "torch.cuda.synchronize",
    "torch.cuda.current_stream",
    "torch.cuda.empty_cache",
    "torch.cuda.mem_get_info",
    "torch.allclose",
    "torch.isclose",
    "torch.equal",
    "torch.testing.assert_close",
    "torch.save",
    "torch.load",
    "torch.manual_seed",
    "torch.randn",
    "torch.rand",
    "torch.randint",
    "torch.empty",
    "torch.device",
    "torch.Tensor.clone",
    "torch.Tensor.cpu",
    "torch.Tensor.to",
    "torch.Tensor.__sub__",
    "torch.Tensor.__eq__",
    "torch.Tensor.abs",
    "torch.Tensor.sum",
    "torch.Tensor.data_ptr",
    "torch.Tensor.copy_",
    "torch.Tensor.fill_",
    "torch.nn.Module.__call__",
    "torch.nn.Module._call_impl",
    "torch.nn.Module.load_state_dict",
    "torch.nn.Module.state_dict",
    "torch.profiler.profile",
    "torch.utils._python_dispatch.TorchDispatchMode",
]
_MODULE_ROOTS = ("torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft")
_SCALARS = (int, float, str, bool, tuple)


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise LookupError(dotted)


def snapshot(task_namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """{name: object} of the critical callables, every public callable of torch's functional
    namespaces, and the task module's Model methods and scalar globals."""
    held: dict[str, Any] = {}
    for name in CRITICAL:
        try:
            held[name] = _resolve(name)
        except (LookupError, AttributeError):
            continue
    for root in _MODULE_ROOTS:
        try:
            module = importlib.import_module(root)
        except ImportError:
            continue
        for attr, value in vars(module).items():
            if (
                not attr.startswith("_")
                and callable(value)
                and not isinstance(value, type | types.ModuleType)
            ):
                held[f"{root}.{attr}"] = value
    for name, value in list(held.items()):
        code = getattr(value, "__code__", None)
        if code is not None:
            held[f"{name}.__code__"] = code
    if task_namespace is not None:
        for attr, value in task_namespace.items():
            if attr.startswith("__"):
                continue
            if isinstance(value, _SCALARS) or callable(value):
                held[f"task.{attr}"] = value
        model = task_namespace.get("Model")
        if isinstance(model, type):
            for attr, value in vars(model).items():
                held[f"task.Model.{attr}"] = value
    return held


def changed(before: dict[str, Any], task_namespace: dict[str, Any] | None = None) -> list[str]:
    """Names whose current object is not the one in `before` (rebound, deleted or code-swapped)."""
    now = snapshot(task_namespace)
    moved = []
    for name, value in before.items():
        current = now.get(name, _MISSING)
        if current is _MISSING or (current is not value and not _same_scalar(current, value)):
            moved.append(name)
    return sorted(moved)


def _same_scalar(a: Any, b: Any) -> bool:
    return isinstance(a, _SCALARS) and type(a) is type(b) and a == b


_MISSING = object()

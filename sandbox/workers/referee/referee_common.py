"""What the referee's candidate and judge workers must do identically (torch + stdlib only).

Both sides rebuild the same reference state and the same inputs from the seeds the host
chose, so nothing the candidate process touches is ever read back as a reference: the judge
regenerates its own pristine copies and compares bit-level checksums.
"""

from __future__ import annotations

import os
import random
import sys
import traceback
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from protocol import LeafDescription

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
OOM_ERRORS: tuple[type[BaseException], ...] = (
    getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError),
)
_CUDA_ERROR_WORDS = (
    "CUDA error",
    "CUDA kernel errors",
    "cudaError",
    "illegal memory access",
    "illegal address",
    "device-side assert",
    "CUBLAS_STATUS",
    "CUDNN_STATUS",
    "unspecified launch failure",
)


class StageFailure(Exception):
    """A check of the worker failed (not an exception of the code under test)."""

    def __init__(self, stage: str, kind: str, message: str) -> None:
        super().__init__(message)
        self.stage, self.kind, self.message = stage, kind, message


# -- the task ---------------------------------------------------------------------------------
def load_task_module(source: str, filename: str) -> dict[str, Any]:
    """Run a task's source as module `kernel_agent_reference` and return its namespace."""
    import hub_offline

    hub_offline.prepare(source)
    module = types.ModuleType("kernel_agent_reference")
    module.__file__ = filename
    sys.modules[module.__name__] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if name not in module.__dict__:
            raise LookupError(f"the task defines no `{name}`")
    return module.__dict__


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


def to_device(value: Any, device: str) -> Any:
    if type(value) is torch.Tensor:
        return value.to(device)
    if type(value) in (list, tuple):
        return type(value)(to_device(v, device) for v in value)
    return value


def seeded_call(
    fn: Callable[[], Any], seed: int, device: str, *, made_on: list[str] | None = None
) -> list[Any]:
    """`fn()` with every RNG seeded and factory functions defaulting to `device`: a task's
    `torch.rand(...)` is made on the GPU, by the GPU's generator. Tensors made elsewhere (numpy, an
    explicit `device="cpu"`) are moved; `made_on` gets "cpu" for them, else the device's type."""
    seed_everything(seed)
    with torch.device(device):
        values = list(fn())
    if made_on is not None:
        wanted = torch.device(device).type
        made_on.append("cpu" if any(t.device.type != wanted for t in tensors_in(values)) else wanted)
    return [to_device(v, device) for v in values]


def hidden_allowed(
    reference: torch.nn.Module, get_inputs: Callable[[], Any], probe_seed: int | None, device: str
) -> list[str]:
    """The hidden transforms this evaluation's trials may draw: TRIAL_TRANSFORMS under which the
    reference stays finite on a probe input (hidden_inputs.safe_transforms). The candidate (before
    its code is imported) and the judge each compute it from the same probe seed; a difference would
    show as inputs that differ between them. No probe seed: the task's own inputs only."""
    if probe_seed is None:
        return ["task"]
    from hidden_inputs import TRIAL_TRANSFORMS, safe_transforms

    probe = seeded_call(get_inputs, probe_seed, device)
    return safe_transforms(reference, probe, probe_seed, TRIAL_TRANSFORMS)


def trial_inputs(
    get_inputs: Callable[[], Any], seed: int, device: str, index: int, allowed: list[str]
) -> tuple[list[Any], str]:
    """A correctness trial's inputs and the transform its seed drew: the task's own values for trial
    0, the centred ones for trial 1 where `allowed` has them (the precision check's), a hidden
    transform among `allowed` for the others (hidden_inputs.py)."""
    inputs = seeded_call(get_inputs, seed, device)
    if index == 0 or allowed == ["task"]:
        return inputs, "task"
    from hidden_inputs import PRECISION_TRIAL_TRANSFORM, HiddenDraw, apply, draw

    chosen = (
        HiddenDraw(PRECISION_TRIAL_TRANSFORM, 0.0, 0)
        if index == 1 and PRECISION_TRIAL_TRANSFORM in allowed
        else draw(seed, allowed)
    )
    return apply(inputs, chosen), chosen.transform


def precision_trial(trials: int, allowed: list[str]) -> int:
    """The trial whose outputs the judge's effective-precision check reads."""
    from hidden_inputs import PRECISION_TRIAL_TRANSFORM

    return 1 if trials > 1 and PRECISION_TRIAL_TRANSFORM in allowed else 0


def build_reference(
    namespace: dict[str, Any], init_args: list[Any], seed: int, device: str
) -> torch.nn.Module:
    seed_everything(seed)
    with torch.device(device):
        model = namespace["Model"](*init_args)
    if not isinstance(model, torch.nn.Module):
        raise TypeError("Model(*get_init_inputs()) is not a torch.nn.Module")
    model = model.to(device)
    randomize_state(model, seed)
    return model


def randomize_state(model: torch.nn.Module, seed: int) -> None:
    """Redraw every floating parameter and buffer, same spread as its default init plus an offset,
    so no kernel can rely on default values (LayerNorm gamma=1, beta=0, BN running stats 0/1)."""
    generators: dict[torch.device, torch.Generator] = {}
    with torch.no_grad():
        for _name, tensor in sorted(model.state_dict(keep_vars=True).items()):
            if not tensor.is_floating_point() or tensor.numel() == 0:
                continue
            gen = generators.get(tensor.device)
            if gen is None:
                gen = generators[tensor.device] = torch.Generator(device=tensor.device)
                gen.manual_seed(seed)
            values = tensor.detach().float()
            mean = values.mean().item()
            spread = values.std().item() if values.numel() > 1 else 0.0
            scale = spread if spread > 1e-12 else max(abs(mean), 1.0) * 0.1
            offset = scale * (2 * torch.rand((), generator=gen, device=tensor.device).item() - 1)
            noise = torch.randn(values.shape, generator=gen, device=tensor.device, dtype=torch.float32)
            fresh = mean + offset + scale * noise
            if bool((values >= 0).all()):  # variances and other non-negative statistics stay valid
                fresh = fresh.abs()
            tensor.copy_(fresh.to(tensor.dtype))


# -- tensors ----------------------------------------------------------------------------------
def tensors_in(values: Any) -> list[torch.Tensor]:
    if type(values) is torch.Tensor:
        return [values]
    if type(values) in (list, tuple):
        return [t for v in values for t in tensors_in(v)]
    return []


def clone_tree(values: Any) -> Any:
    if type(values) is torch.Tensor:
        return values.clone()
    if type(values) in (list, tuple):
        return type(values)(clone_tree(v) for v in values)
    return values


def _as_bits(tensor: torch.Tensor) -> torch.Tensor:
    flat = tensor.detach().contiguous().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    return flat.view(_INT_OF_SIZE[flat.element_size()])


def checksum(tensor: torch.Tensor) -> str:
    """A content fingerprint that is exact (integer sums over the raw bits) and order-aware."""
    bits = _as_bits(tensor)
    total = int(bits.sum(dtype=torch.int64).item()) if bits.numel() else 0
    mixed = int((bits[1:] ^ bits[:-1]).sum(dtype=torch.int64).item()) if bits.numel() > 1 else 0
    strided = int(bits[::7].sum(dtype=torch.int64).item()) if bits.numel() else 0
    return f"{str(tensor.dtype).removeprefix('torch.')}{list(tensor.shape)}:{total}:{mixed}:{strided}"


def state_checksum(state: dict[str, torch.Tensor]) -> str:
    return ";".join(f"{name}={checksum(t)}" for name, t in sorted(state.items()))


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(_as_bits(a), _as_bits(b).to(a.device)))


def storage_span(tensor: torch.Tensor) -> tuple[int, int] | None:
    try:
        storage = tensor.untyped_storage()
        start = storage.data_ptr()
        return (start, start + storage.nbytes())
    except (RuntimeError, NotImplementedError):
        return None


def aliased_inputs(output: torch.Tensor, inputs: list[torch.Tensor]) -> list[int]:
    """Indexes of the inputs whose memory the output shares."""
    span = storage_span(output)
    if span is None or span[0] == span[1]:
        return []
    found = []
    for index, tensor in enumerate(inputs):
        other = storage_span(tensor)
        if other is not None and other[0] < span[1] and span[0] < other[1]:
            found.append(index)
    return found


def nbytes(values: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_in(values))


# -- outputs ----------------------------------------------------------------------------------
def type_name(value: Any) -> str:
    cls = type(value)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def flatten_outputs(value: Any) -> tuple[str, list[Any]]:
    """(structure, leaves). Only exact tensors, tuples and lists are looked into: a subclass is a
    leaf whose type the checks report, and nothing of it is called."""
    if type(value) is torch.Tensor:
        return "tensor", [value]
    if type(value) in (tuple, list):
        parts = [flatten_outputs(v) for v in value]
        inner = ", ".join(structure for structure, _ in parts)
        return f"{type(value).__name__}[{inner}]", [leaf for _, leaves in parts for leaf in leaves]
    if value is None or type(value) in (bool, int, float):
        return type(value).__name__.lower() if value is not None else "none", [value]
    if isinstance(value, torch.Tensor):
        return "tensor", [value]
    return f"other:{type_name(value)}", [value]


def describe_leaf(value: Any) -> LeafDescription:
    """What the host needs to know of one output leaf, without calling into it."""
    if type(value) is torch.Tensor:
        return {
            "type": "torch.Tensor",
            "exact_tensor": True,
            "shape": list(value.shape),
            "dtype": str(value.dtype).removeprefix("torch."),
            "device": str(value.device),
        }
    return {"type": type_name(value), "exact_tensor": False}


# -- errors -----------------------------------------------------------------------------------
def classify_error(exc: BaseException) -> str:
    if isinstance(exc, OOM_ERRORS):
        return "oom"
    if isinstance(exc, SystemExit):
        return "exit"
    text = str(exc)
    if any(word in text for word in _CUDA_ERROR_WORDS):
        return "cuda_error"
    return "exception"


_HARNESS_FRAMES = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # every worker group
    "<frozen importlib",
    "torch/nn/modules/module.py",
)


def describe_error(exc: BaseException, limit: int = 4000) -> tuple[str, str]:
    """(one-paragraph message, traceback without the harness's own frames)."""
    if isinstance(exc, SystemExit):
        message = f"the candidate called exit({exc.code!r})"
    else:
        message = f"{type(exc).__name__}: {exc}".strip()
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_HARNESS_FRAMES)
    ]
    frames = [f for f in frames if not any(part in f.filename for part in _HARNESS_FRAMES[1:])]
    text = "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc))
    return message[:limit], text[-limit:]

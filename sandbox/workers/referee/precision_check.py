"""The judge's side of the precision policy (docs/precision.md): the numeric flags its reference and
baselines run under, and the effective-precision check of a candidate's outputs (torch + stdlib).

The reference the candidate is compared with is computed in full FP32 under every policy (TF32
off for matmuls and cuDNN: torch leaves cuDNN's TF32 on by default). The baselines are timed under
the policy's flags: TF32 on for `tf32`, autocast to the format for `fp16`/`bf16` (torch's own
mixed precision: matmuls and convolutions in the format, reductions and pointwise ops as autocast
decides), and under `match` at the precision measured for the candidate.

The check (`measure`) runs on the precision trial's inputs (trial 1's, centred; referee_common.
precision_trial): a float64 copy of
the model and the inputs gives the reference; eager at FP32, TF32 (GPU only) and the model cast to
FP16 and BF16 give the ladder (precision.py); the candidate's error is placed on it per output and
the least precise output decides.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from precision import (
    DISPLAY,
    PRECISIONS,
    PrecisionReading,
    check_policy,
    classify,
    round_to,
    sample_indices,
    worst,
)

if TYPE_CHECKING:
    from protocol import PrecisionRecord

DEFAULT_POLICY = "fp32"
SAMPLE_LIMIT = 1 << 22  # output elements whose errors are taken (all of a smaller output)
SAMPLE_SEED = 0x5EED
AUTOCAST = {"fp16": torch.float16, "bf16": torch.bfloat16}
CAST = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def set_tf32(enabled: bool) -> None:
    """TF32 for matmuls and cuDNN convolutions, as torch's own flags spell it."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    torch.set_float32_matmul_precision("high" if enabled else "highest")


@contextlib.contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    before = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    set_tf32(enabled)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before[:2]
        torch.set_float32_matmul_precision(before[2])


class Autocast(torch.nn.Module):
    """`model` called under torch.autocast to `dtype` (a module, so torch.compile traces the
    autocast region with it)."""

    def __init__(self, model: torch.nn.Module, device_type: str, dtype: torch.dtype) -> None:
        super().__init__()
        self.model, self.device_type, self.dtype = model, device_type, dtype

    def forward(self, *inputs: Any) -> Any:
        with torch.autocast(device_type=self.device_type, dtype=self.dtype):
            return self.model(*inputs)


def baseline_model(model: torch.nn.Module, precision: str, device: str) -> torch.nn.Module:
    """What eager and torch.compile time for a baseline at `precision` (run it under `tf32(...)`)."""
    if precision in AUTOCAST:
        return Autocast(model, torch.device(device).type, AUTOCAST[precision])
    return model


def baseline_flags(precision: str) -> contextlib.AbstractContextManager[None]:
    """The global flags the baselines are compiled and timed under."""
    return tf32(precision == "tf32")


# -- the check ---------------------------------------------------------------------------------


def _cast(values: Any, dtype: torch.dtype) -> Any:
    if type(values) is torch.Tensor:
        return values.to(dtype) if values.is_floating_point() else values
    if type(values) in (list, tuple):
        return type(values)(_cast(v, dtype) for v in values)
    return values


def _leaves(output: Any) -> list[Any]:
    if type(output) in (list, tuple):
        return [leaf for value in output for leaf in _leaves(value)]
    return [output]


def _floating(leaf: Any) -> bool:
    return type(leaf) is torch.Tensor and leaf.is_floating_point()


def _run_at(model: torch.nn.Module, inputs: Sequence[Any], precision: str) -> list[Any] | None:
    """Eager's outputs at `precision` (fp64 is the reference) on `inputs`, which are fresh for this
    call (the model may write into them); None where it cannot run so."""
    try:
        with torch.no_grad():
            if precision == "tf32" and _on_cpu(model, inputs):
                return _leaves(_emulated_tf32(model)(*_rounded(list(inputs))))
            if precision == "tf32":
                with tf32(True):
                    return _leaves(model(*inputs))
            dtype = CAST[precision]
            cast = copy.deepcopy(model).to(dtype)
            return _leaves(cast(*_cast(list(inputs), dtype)))
    except torch.OutOfMemoryError:
        raise
    except Exception:  # an op without a kernel for the format: that rung stays off the ladder
        return None


def _on_cpu(model: torch.nn.Module, inputs: Sequence[Any]) -> bool:
    tensors = [*model.parameters(), *model.buffers(), *_leaves(list(inputs))]
    return not any(type(t) is torch.Tensor and t.is_cuda for t in tensors)


def _rounded(values: Any) -> Any:
    if type(values) is torch.Tensor:
        return round_to(values, "tf32").to(values.dtype) if values.dtype == torch.float32 else values
    if type(values) in (list, tuple):
        return type(values)(_rounded(v) for v in values)
    return values


def _emulated_tf32(model: torch.nn.Module) -> torch.nn.Module:
    """No TF32 off the GPU (tests, calibration): the model with its float32 state rounded to TF32's
    10 mantissa bits, run on rounded inputs in FP32 (precision.emulated_output's rounding). It
    rounds the operands of every op, not only of matmuls and convolutions."""
    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for tensor in rounded.state_dict(keep_vars=True).values():
            if tensor.dtype == torch.float32:
                tensor.copy_(_rounded(tensor))
    return rounded


class _Picker:
    """The elements an output's errors are taken over: all of a small output, a seeded sample of a
    large one, always only where the float64 reference is finite."""

    def __init__(self, reference: torch.Tensor, expected: torch.Tensor) -> None:
        flat = reference.detach().reshape(-1)
        self.indices = sample_indices(flat.numel(), SAMPLE_LIMIT, SAMPLE_SEED).to(flat.device)
        self.sampled = flat.numel() > SAMPLE_LIMIT
        picked = flat[self.indices].to(torch.float64)
        # where FP32 itself overflows (exp of a large value) no precision is told apart
        in_fp32 = expected.detach().reshape(-1)[self.indices.to(expected.device)].to(flat.device)
        finite = torch.isfinite(picked) & torch.isfinite(in_fp32)
        self.indices, self.reference = self.indices[finite], picked[finite]

    def error(self, actual: torch.Tensor) -> float:
        picked = actual.detach().reshape(-1)[self.indices.to(actual.device)].to(torch.float64)
        diff = picked.to(self.reference.device) - self.reference
        if not bool(torch.isfinite(diff).all()):
            return math.inf
        scale = float(self.reference.norm())
        norm = float(diff.norm())
        return norm / scale if scale > 0 else norm


def not_measured(policy: str, note: str) -> PrecisionRecord:
    return {
        "policy": policy,
        "measured": None,
        "words": "",
        "error": None,
        "ladder": {},
        "ok": True,
        "line": f"precision not measured: {note}",
        "baseline_precision": DEFAULT_POLICY if policy == "match" else policy,
        "sampled": False,
        "note": note,
    }


def measure(
    model: torch.nn.Module,
    make_inputs: Callable[[], list[Any]],
    expected: Sequence[Any],
    candidate: Sequence[Any],
    policy: str,
) -> PrecisionRecord:
    """The candidate's outputs (`candidate`, one per output leaf, None for non-tensors) placed on
    eager's ladder against a float64 reference of `model` on `make_inputs()`; `expected` is the
    referee's own FP32 output of the same inputs (the ladder's FP32 rung)."""
    wanted = [
        i for i, (e, c) in enumerate(zip(expected, candidate, strict=True)) if _floating(e) and _floating(c)
    ]
    if not wanted:
        return not_measured(policy, "no floating-point output to measure")
    try:
        reference = _run_at(model, make_inputs(), "fp64")
    except torch.OutOfMemoryError:
        reference = None
        note = "the float64 reference does not fit in the GPU's memory"
    else:
        note = "the model cannot run in float64"
    if reference is None or len(reference) != len(expected):
        return not_measured(policy, note)
    if any(not _floating(reference[i]) or reference[i].shape != expected[i].shape for i in wanted):
        return not_measured(policy, "the float64 reference's outputs differ in kind from FP32's")
    pickers = {i: _Picker(reference[i], expected[i]) for i in wanted}
    del reference
    sampled = any(p.sampled for p in pickers.values())
    ladders: dict[int, dict[str, float]] = {i: {"fp32": pickers[i].error(expected[i])} for i in wanted}
    for precision in PRECISIONS[1:]:
        try:
            outputs = _run_at(model, make_inputs(), precision)
        except torch.OutOfMemoryError:
            outputs = None
        if outputs is None or len(outputs) != len(expected):
            continue
        for i in wanted:
            if _floating(outputs[i]):
                ladders[i][precision] = pickers[i].error(outputs[i])
        del outputs
    readings = [classify(pickers[i].error(candidate[i]), ladders[i]) for i in wanted]
    return _record(worst(readings), policy, sampled)


def _record(reading: PrecisionReading, policy: str, sampled: bool) -> PrecisionRecord:
    check = check_policy(reading, policy)
    line = check.line
    if policy == "match" and check.ok:
        line += f"; speedups stated against the baselines at {DISPLAY[check.baseline_precision]}"
    described = reading.as_dict()
    return {
        "policy": policy,
        "measured": reading.measured,
        "words": reading.words,
        "error": reading.error if math.isfinite(reading.error) else None,
        # a rung that overflowed (FP16 past 65504) is left out: JSON has no infinity
        "ladder": {name: error for name, error in described["ladder"].items() if math.isfinite(error)},
        "ok": check.ok,
        "line": line,
        "baseline_precision": check.baseline_precision,
        "sampled": sampled,
        "note": "",
    }

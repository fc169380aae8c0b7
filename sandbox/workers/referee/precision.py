"""Effective precision: which arithmetic a candidate's outputs are consistent with.

The judge holds a float64 reference of each output (the model and inputs copied to float64, or a
sampled subset of output elements where the copy does not fit) and the outputs eager produces at
each precision the policy knows (fp32, TF32 matmuls and convolutions, BF16, FP16). Their errors
against the float64 reference form a ladder; the candidate's own error is placed on that ladder.
A candidate whose error is far above eager fp32's and consistent with TF32 was computed with
TF32-like rounding, whatever its source says.

Where eager at some precision cannot be run (no GPU: tests, calibration), `emulated_output` makes
the same rounding on CPU tensors: operands rounded to the format's mantissa, fp32 accumulation,
the result rounded to the format for the 16-bit types.

Pure functions over tensors; torch and the standard library only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# Best first. `match` is a policy, not a precision: it accepts any of these and times the baseline
# at the precision measured.
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")
POLICIES: tuple[str, ...] = (*PRECISIONS, "match")
BELOW_ALL = "below_bf16"

# Explicit mantissa bits (without the implicit one) of each format.
MANTISSA_BITS: dict[str, int] = {"fp32": 23, "tf32": 10, "fp16": 10, "bf16": 7}
DISPLAY: dict[str, str] = {
    "fp32": "FP32",
    "tf32": "TF32",
    "fp16": "FP16",
    "bf16": "BF16",
    BELOW_ALL: "less than BF16",
}

# Two rungs whose errors lie within this factor of each other cannot be told apart on these
# inputs (TF32 and FP16 share a 10-bit mantissa): they form one class, named by its best member.
SAME_CLASS_FACTOR = 3.0
# The FP32 class is wider: eager's FP32 error is one summation order's (cuBLAS's blocked sums) and
# an honest FP32 kernel's own order can be several times worse. A serial dot product over K = 16384
# values in [0, 1) is 5x eager's error, which is there within 8x of TF32's (positive operands
# average TF32's rounding out). Such a candidate must not be called TF32: a lower precision is told
# apart from FP32 only where the inputs separate them by more than this (centred inputs: TF32 is
# ~1000x FP32 on a GEMM).
FP32_CLASS_FACTOR = 30.0
# A candidate is placed in a lower class only when its error comes within this factor of that
# class's own error ("consistent with" it): an honest FP32 kernel keeps a margin of at least
# FP32_CLASS_FACTOR / MATCH_FACTOR = 10x over eager's FP32 error.
MATCH_FACTOR = 3.0
# Past the worst rung's error by this factor the candidate is below every known precision.
BELOW_ALL_FACTOR = 3.0


def unit_roundoff(precision: str) -> float:
    return 2.0 ** -(MANTISSA_BITS[precision] + 1)


def round_mantissa(tensor: torch.Tensor, bits: int) -> torch.Tensor:
    """fp32 values rounded to `bits` explicit mantissa bits, round to nearest even (TF32 at 10)."""
    if bits >= 23:
        return tensor.float().clone()
    x = tensor.float().contiguous()
    drop = 23 - bits
    raw = x.view(torch.int32).to(torch.int64)
    lsb = (raw >> drop) & 1
    rounded = (raw + ((1 << (drop - 1)) - 1) + lsb) >> drop << drop
    finite = torch.isfinite(x)
    rounded = torch.where(finite, rounded, raw)
    # int64 -> int32 reinterpretation: take the low 32 bits with their sign.
    low = ((rounded + 2**31) % 2**32 - 2**31).to(torch.int32)
    return low.view(torch.float32)


def round_to(tensor: torch.Tensor, precision: str) -> torch.Tensor:
    """A floating tensor as the format would hold it, returned as float32."""
    if not tensor.is_floating_point():
        return tensor
    if precision == "fp32":
        return tensor.float()
    if precision == "tf32":
        return round_mantissa(tensor, MANTISSA_BITS["tf32"])
    if precision == "fp16":
        return tensor.to(torch.float16).float()
    if precision == "bf16":
        return tensor.to(torch.bfloat16).float()
    raise ValueError(f"unknown precision {precision!r}; choose one of: {', '.join(PRECISIONS)}")


def _map_tensors(values: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(values, torch.Tensor):
        return fn(values)
    if isinstance(values, (list, tuple)):
        return type(values)(_map_tensors(v, fn) for v in values)
    return values


def emulated_output(fn: Callable[..., torch.Tensor], inputs: Sequence[Any], precision: str) -> torch.Tensor:
    """`fn(*inputs)` as a kernel at `precision` computes it: floating operands rounded to the
    format, fp32 accumulation, and for FP16/BF16 the result stored in the format."""
    rounded = _map_tensors(list(inputs), lambda t: round_to(t, precision))
    out = fn(*rounded).float()
    return round_to(out, precision) if precision in ("fp16", "bf16") else out


def relative_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """||actual - reference|| / ||reference|| in float64; an all-zero reference uses the plain norm."""
    ref = reference.detach().to(torch.float64).flatten()
    diff = actual.detach().to(torch.float64).flatten() - ref
    if not bool(torch.isfinite(diff).all()):
        return math.inf
    scale = float(ref.norm())
    norm = float(diff.norm())
    return norm / scale if scale > 0 else norm


def sample_indices(numel: int, limit: int, seed: int) -> torch.Tensor:
    """At most `limit` distinct flat indices of an output, drawn from `seed` (all when it is small):
    the elements a float64 reference is computed for when the whole output does not fit."""
    if numel <= limit:
        return torch.arange(numel)
    gen = torch.Generator().manual_seed(seed)
    if numel <= 4 * limit:
        return torch.randperm(numel, generator=gen)[:limit].sort().values
    # A permutation of every index costs O(numel): 1.6e9 for KernelBench's full-size ReLU, a minute
    # of one CPU core and 13 GB. Draws with replacement cost O(limit); 1.25x of them (and 64 more for
    # a small limit) leave at least `limit` distinct ones past 4x, of which `limit` are kept.
    drawn = torch.unique(torch.randint(numel, (limit + limit // 4 + 64,), generator=gen))
    return drawn[torch.randperm(drawn.numel(), generator=gen)[:limit]].sort().values


def sampled_error(actual: torch.Tensor, reference_at: torch.Tensor, indices: torch.Tensor) -> float:
    """The relative error over the sampled elements only (`reference_at` holds them in order)."""
    picked = actual.detach().flatten()[indices.to(actual.device)]
    return relative_error(picked, reference_at)


@dataclass(frozen=True)
class Rung:
    """One precision class on the ladder: the precisions it holds and eager's error there."""

    precisions: tuple[str, ...]
    error: float
    """The class's own error: its best member's."""
    worst_error: float = 0.0
    """Its worst member's."""

    @property
    def name(self) -> str:
        return self.precisions[0]

    def describe(self) -> str:
        return " or ".join(DISPLAY[p] for p in self.precisions)


@dataclass(frozen=True)
class PrecisionReading:
    """Where a candidate's error falls: `measured` is the best precision it is consistent with."""

    measured: str
    error: float
    rungs: tuple[Rung, ...]
    words: str = field(default="")

    def as_dict(self) -> dict[str, Any]:
        return {
            "measured": self.measured,
            "error": self.error,
            "ladder": {"/".join(r.precisions): r.error for r in self.rungs},
            "words": self.words,
        }


def build_ladder(errors: Mapping[str, float]) -> tuple[Rung, ...]:
    """Eager's error at each precision (against float64), floored (an exact op such as ReLU has
    error 0 at fp32: an honest kernel may still round once, so fp32's floor is its unit roundoff;
    the others' floors only keep the ladder positive), then merged where neighbours cannot be told
    apart."""
    known = [p for p in PRECISIONS if p in errors]
    if "fp32" not in known:
        raise ValueError("the ladder needs eager's fp32 error")
    floored = {p: max(float(errors[p]), unit_roundoff(p) / (1 if p == "fp32" else 1024)) for p in known}
    ordered = sorted(known, key=lambda p: (floored[p], PRECISIONS.index(p)))
    rungs: list[list[str]] = []
    for precision in ordered:
        factor = FP32_CLASS_FACTOR if rungs and "fp32" in rungs[-1] else SAME_CLASS_FACTOR
        if rungs and floored[precision] <= factor * floored[rungs[-1][0]]:
            rungs[-1].append(precision)
        else:
            rungs.append([precision])
    return tuple(
        Rung(
            tuple(sorted(group, key=PRECISIONS.index)),
            min(floored[p] for p in group),
            max(floored[p] for p in group),
        )
        for group in rungs
    )


def classify(candidate_error: float, errors: Mapping[str, float]) -> PrecisionReading:
    """Place a candidate's error on eager's ladder: it stays in a class until it comes within
    MATCH_FACTOR of the next class's error (rungs sit at least SAME_CLASS_FACTOR apart)."""
    rungs = build_ladder(errors)
    for rung, after in itertools.pairwise(rungs):
        if candidate_error < after.error / MATCH_FACTOR:
            return _reading(rung.name, candidate_error, rungs, rung.describe())
    last = rungs[-1]
    if candidate_error <= BELOW_ALL_FACTOR * last.worst_error:
        return _reading(last.name, candidate_error, rungs, last.describe())
    return _reading(BELOW_ALL, candidate_error, rungs, DISPLAY[BELOW_ALL])


def _reading(measured: str, error: float, rungs: tuple[Rung, ...], words: str) -> PrecisionReading:
    return PrecisionReading(measured=measured, error=error, rungs=rungs, words=words)


def worst(readings: Sequence[PrecisionReading]) -> PrecisionReading:
    """A candidate with several outputs is as precise as its least precise output."""
    if not readings:
        raise ValueError("no outputs to read the precision of")
    order = (*PRECISIONS, BELOW_ALL)
    return max(readings, key=lambda r: order.index(r.measured))


@dataclass(frozen=True)
class PrecisionCheck:
    """The policy's answer: `ok`, the precision the baseline is timed at, and the line shown."""

    ok: bool
    baseline_precision: str
    line: str


def check_policy(reading: PrecisionReading, allowed: str) -> PrecisionCheck:
    """`allowed` is a precision (its class and better pass) or `match` (anything down to BF16
    passes, and the speedup is stated against eager at the measured precision)."""
    if allowed not in POLICIES:
        raise ValueError(f"unknown precision policy {allowed!r}; choose one of: {', '.join(POLICIES)}")
    measured = reading.measured
    if allowed == "match":
        if measured == BELOW_ALL:
            return PrecisionCheck(False, "bf16", _line(reading, "any of FP32, TF32, FP16, BF16"))
        return PrecisionCheck(True, measured, f"error {reading.error:.2e}: consistent with {reading.words}")
    allowed_rung = next((r for r in reading.rungs if allowed in r.precisions), None)
    measured_rung = next((r for r in reading.rungs if measured in r.precisions), None)
    if measured_rung is not None and allowed_rung is not None and measured_rung.error <= allowed_rung.error:
        return PrecisionCheck(True, allowed, f"error {reading.error:.2e}: consistent with {reading.words}")
    return PrecisionCheck(False, allowed, _line(reading, DISPLAY[allowed]))


def _line(reading: PrecisionReading, allowed_words: str) -> str:
    kind = "accumulation" if reading.measured in ("tf32", "fp16", "bf16") else "rounding"
    return (
        f"error consistent with {reading.words} {kind} "
        f"({reading.error:.2e} against a float64 reference); allowed: {allowed_words}"
    )

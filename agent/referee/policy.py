"""What a candidate may call (operator policies) and how close its outputs must be (tolerances).

The operator lists live in sandbox/workers/referee/op_policy.py so the candidate worker enforces
exactly what is documented and tested here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from sandbox.workers.referee.op_policy import (
    ALLOCATION,
    LAYOUT_COPIES,
    POLICIES,
    QUERIES,
    STRICT_ALLOWED,
    VIEWS,
    forbidden,
    is_allowed,
)
from sandbox.workers.referee.precision import POLICIES as PRECISION_POLICIES

PolicyName = Literal["strict", "kernelbench"]
PrecisionName = Literal["fp32", "tf32", "fp16", "bf16", "match"]
"""The arithmetic a candidate may use (docs/precision.md): the baselines are timed under the same
flags, the tolerances follow it, and the judge measures what the candidate actually used."""

DEFAULT_PRECISION: PrecisionName = "fp32"

POLICY_RULES: dict[str, str] = {
    "strict": (
        "CUDA-Agent rules: ModelNew.forward and the extension do no compute through torch; "
        "allocation, views, shape queries and layout copies are allowed; cuBLAS/cuDNN called "
        "from the extension's own C++ are allowed"
    ),
    "kernelbench": "torch glue is allowed and reported",
}

__all__ = [
    "ALLOCATION",
    "LAYOUT_COPIES",
    "POLICIES",
    "POLICY_RULES",
    "PRECISIONS",
    "PRECISION_TOLERANCES",
    "QUERIES",
    "STRICT_ALLOWED",
    "TOLERANCES",
    "VIEWS",
    "DtypeTolerance",
    "PolicyName",
    "PrecisionName",
    "TolerancePolicy",
    "check_policy_name",
    "check_precision_name",
    "forbidden",
    "is_allowed",
    "tolerance_policy",
]


def check_policy_name(name: str) -> PolicyName:
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}")
    return name  # type: ignore[return-value]


PRECISIONS: tuple[str, ...] = PRECISION_POLICIES


def check_precision_name(name: str) -> PrecisionName:
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; choose one of: {', '.join(PRECISIONS)}")
    return name  # type: ignore[return-value]


class DtypeTolerance(BaseModel):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    norm_rtol: float = Field(ge=0, description="limit on ||actual - expected|| / ||expected||")

    def as_list(self) -> list[float]:
        return [self.atol, self.rtol, self.norm_rtol]


class TolerancePolicy(BaseModel):
    """Per expected dtype; `int` covers integer and bool outputs, `default` everything else."""

    name: str
    per_dtype: dict[str, DtypeTolerance]

    def for_dtype(self, dtype: str) -> DtypeTolerance:
        if dtype in self.per_dtype:
            return self.per_dtype[dtype]
        if dtype.startswith(("int", "uint", "bool")) and "int" in self.per_dtype:
            return self.per_dtype["int"]
        return self.per_dtype["default"]

    def for_worker(self) -> dict[str, list[float]]:
        return {name: tol.as_list() for name, tol in self.per_dtype.items()}


def _tol(atol: float, rtol: float, norm_rtol: float) -> DtypeTolerance:
    return DtypeTolerance(atol=atol, rtol=rtol, norm_rtol=norm_rtol)


TOLERANCES: dict[str, TolerancePolicy] = {
    # KernelBench's and CUDA-Agent's atol = rtol = 1e-2, plus a norm-wise limit so that a
    # near-zero answer to an output that is tiny everywhere fails.
    "default": TolerancePolicy(
        name="default",
        per_dtype={
            "default": _tol(1e-2, 1e-2, 1e-2),
            "float16": _tol(1e-2, 1e-2, 2e-2),
            "bfloat16": _tol(1e-2, 1e-2, 2e-2),
            "int": _tol(0, 0, 0),
        },
    ),
    "tight": TolerancePolicy(
        name="tight",
        per_dtype={
            "default": _tol(1e-4, 1e-4, 1e-4),
            "float64": _tol(1e-7, 1e-7, 1e-7),
            "float16": _tol(1e-3, 1e-3, 5e-3),
            "bfloat16": _tol(1e-2, 1e-2, 1e-2),
            "int": _tol(0, 0, 0),
        },
    ),
}


def _precision_tolerance(name: str, float32: DtypeTolerance) -> TolerancePolicy:
    """The `default` table with float32 (and float64) outputs held to the precision's limits."""
    per_dtype = dict(TOLERANCES["default"].per_dtype)
    per_dtype["default"] = float32
    return TolerancePolicy(name=name, per_dtype=per_dtype)


PRECISION_TOLERANCES: dict[str, TolerancePolicy] = {
    # docs/precision.md's table. fp32: an honest FP32 kernel's error sits orders of magnitude below
    # these (eager FP32 against float64: ~1e-7); the norm limit is what a TF32 GEMM (~3e-4) fails.
    "fp32": _precision_tolerance("fp32", _tol(1e-3, 1e-3, 1e-4)),
    "tf32": _precision_tolerance("tf32", _tol(1e-3, 1e-3, 1e-3)),
    "fp16": _precision_tolerance("fp16", _tol(1e-2, 1e-2, 2e-2)),
    "bf16": _precision_tolerance("bf16", _tol(2e-2, 2e-2, 2e-2)),
    # `match` accepts anything down to BF16 (the measured precision is then checked), so its outputs
    # are compared at BF16's limits.
    "match": _precision_tolerance("match", _tol(2e-2, 2e-2, 2e-2)),
}


def tolerance_policy(value: str | TolerancePolicy) -> TolerancePolicy:
    if isinstance(value, TolerancePolicy):
        if "default" not in value.per_dtype:
            raise ValueError(f"tolerance policy {value.name!r} needs a 'default' entry")
        return value
    try:
        return TOLERANCES[value]
    except KeyError:
        raise ValueError(f"unknown tolerance {value!r}; choose one of: {', '.join(TOLERANCES)}") from None

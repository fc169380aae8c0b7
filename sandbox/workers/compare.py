"""Where and by how much an output differs from the expected one (torch + stdlib only).

Elementwise closeness (|a - e| <= atol + rtol * |e|, as torch.isclose) AND norm-wise relative
error ||a - e|| / ||e||, so that zeros returned for a tiny output fail. Non-finite values must
match exactly (NaN where NaN is expected, the same infinity); a NaN never passes a finite
check. Work is chunked so a huge output never needs more than a few float64 copies of a chunk.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import torch

if TYPE_CHECKING:
    from protocol import DiffRecord, Tolerances

CHUNK = 1 << 25


def tolerance_for(dtype: torch.dtype, tolerances: Tolerances) -> tuple[float, float, float]:
    """(atol, rtol, norm_rtol) for an expected dtype from {"float32": [...], "int": [...], "default": [...]}."""
    name = str(dtype).removeprefix("torch.")
    if name in tolerances:
        values = tolerances[name]
    elif not dtype.is_floating_point and not dtype.is_complex and "int" in tolerances:
        values = tolerances["int"]
    else:
        values = tolerances["default"]
    atol, rtol, norm_rtol = values
    return float(atol), float(rtol), float(norm_rtol)


def _unravel(flat_index: int, shape: list[int]) -> list[int]:
    index = []
    for size in reversed(shape):
        flat_index, rest = divmod(flat_index, max(size, 1))
        index.append(rest)
    return list(reversed(index))


def _flat_real(t: torch.Tensor) -> torch.Tensor:
    """The elements in logical order, complex ones as (real, imaginary) pairs, in their own dtype:
    each chunk becomes float64 on its own, so a 6 GB output never needs a 12 GB copy."""
    flat = t.detach().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    return flat


def compare_tensors(
    expected: torch.Tensor, actual: torch.Tensor, *, atol: float, rtol: float, norm_rtol: float
) -> DiffRecord:
    """The full diff record for one output; `passed` says whether every check held (it is set
    last, so the record is built as a plain dict)."""
    record: dict[str, Any] = {
        "shape_expected": list(expected.shape),
        "shape_actual": list(actual.shape),
        "dtype_expected": str(expected.dtype).removeprefix("torch."),
        "dtype_actual": str(actual.dtype).removeprefix("torch."),
        "numel": expected.numel(),
        "atol": atol,
        "rtol": rtol,
        "norm_rtol": norm_rtol,
        "problems": [],
    }
    if list(expected.shape) != list(actual.shape):
        record["problems"].append(
            f"shape {list(actual.shape)} where {list(expected.shape)} is expected"
            + (" (a broadcastable shape is not accepted)" if actual.numel() != expected.numel() else "")
        )
        record["passed"] = False
        return cast("DiffRecord", record)
    if expected.dtype != actual.dtype:
        record["problems"].append(
            f"dtype {record['dtype_actual']} where {record['dtype_expected']} is expected"
        )
    e_all = _flat_real(expected)
    a_all = _flat_real(actual.to(expected.device))
    stats = {
        "max_abs": 0.0,
        "max_rel": 0.0,
        "mismatch": 0,
        "nonfinite_mismatch": 0,
        "e_nan": 0,
        "a_nan": 0,
        "e_inf": 0,
        "a_inf": 0,
        "diff_sq": 0.0,
        "ref_sq": 0.0,
    }
    worst: tuple[float, int] | None = None  # (score, flat index); larger score = worse
    first_nonfinite: int | None = None
    for start in range(0, e_all.numel(), CHUNK):
        e = e_all[start : start + CHUNK].to(torch.float64)
        a = a_all[start : start + CHUNK].to(torch.float64)
        e_nan, a_nan = torch.isnan(e), torch.isnan(a)
        e_inf, a_inf = torch.isinf(e), torch.isinf(a)
        finite = torch.isfinite(e) & torch.isfinite(a)
        same_nonfinite = (e_nan & a_nan) | (e_inf & a_inf & (e == a))
        nonfinite_bad = ~finite & ~same_nonfinite
        diff = torch.where(finite, (a - e).abs(), torch.zeros_like(e))
        limit = atol + rtol * e.abs()
        over = finite & (diff > limit)
        stats["e_nan"] += int(e_nan.sum())
        stats["a_nan"] += int(a_nan.sum())
        stats["e_inf"] += int(e_inf.sum())
        stats["a_inf"] += int(a_inf.sum())
        bad_count = int(nonfinite_bad.sum())
        stats["nonfinite_mismatch"] += bad_count
        stats["mismatch"] += int(over.sum()) + bad_count
        if bad_count and first_nonfinite is None:
            first_nonfinite = start + int(torch.nonzero(nonfinite_bad)[0, 0])
        if diff.numel():
            stats["max_abs"] = max(stats["max_abs"], float(diff.max()))
            rel = diff / e.abs().clamp_min(max(atol, 1e-30))
            stats["max_rel"] = max(stats["max_rel"], float(rel.max()))
            score = torch.where(finite, diff - limit, torch.full_like(e, -math.inf))
            pos = int(torch.argmax(score))
            value = float(score[pos])
            if worst is None or value > worst[0]:
                worst = (value, start + pos)
        e_finite = torch.where(torch.isfinite(e), e, torch.zeros_like(e))
        stats["diff_sq"] += float((diff * diff).sum())
        stats["ref_sq"] += float((e_finite * e_finite).sum())
    numel = e_all.numel()
    ref_norm = math.sqrt(stats["ref_sq"])
    norm_err = math.sqrt(stats["diff_sq"]) / ref_norm if ref_norm > 0 else None
    record.update(
        max_abs_err=stats["max_abs"],
        max_rel_err=stats["max_rel"],
        norm_rel_err=norm_err,
        mismatch_count=stats["mismatch"],
        mismatch_fraction=stats["mismatch"] / numel if numel else 0.0,
        expected_nan=stats["e_nan"],
        actual_nan=stats["a_nan"],
        expected_inf=stats["e_inf"],
        actual_inf=stats["a_inf"],
        nonfinite_mismatches=stats["nonfinite_mismatch"],
    )
    worst_flat = first_nonfinite if first_nonfinite is not None else (worst[1] if worst else None)
    if worst_flat is not None and numel:
        element = worst_flat if not expected.is_complex() else worst_flat // 2
        record["worst_index"] = _unravel(element, list(expected.shape))
        record["worst_expected"] = float(e_all[worst_flat])
        record["worst_actual"] = float(a_all[worst_flat])
    if stats["mismatch"]:
        record["problems"].append(
            f"{stats['mismatch']} of {numel} elements ({100 * stats['mismatch'] / numel:.3g}%) "
            f"outside atol={atol:g} rtol={rtol:g}"
        )
    if norm_err is not None and norm_err > norm_rtol:
        record["problems"].append(f"norm-wise relative error {norm_err:.3g} above {norm_rtol:g}")
    record["passed"] = not record["problems"]
    return cast("DiffRecord", record)


def compare_values(expected: Any, actual: Any, *, atol: float, rtol: float) -> DiffRecord:
    """A non-tensor output leaf (int, float, bool, None)."""
    record: dict[str, Any] = {"problems": [], "value_expected": repr(expected), "value_actual": repr(actual)}
    if type(expected) is not type(actual):
        record["problems"].append(f"a {type(actual).__name__} where a {type(expected).__name__} is expected")
    elif isinstance(expected, float) and not math.isclose(actual, expected, rel_tol=rtol, abs_tol=atol):
        if not (math.isnan(expected) and math.isnan(actual)):
            record["problems"].append(f"{actual!r} where {expected!r} is expected")
    elif not isinstance(expected, float) and expected != actual:
        record["problems"].append(f"{actual!r} where {expected!r} is expected")
    record["passed"] = not record["problems"]
    return cast("DiffRecord", record)

"""Where and by how much an output differs from the expected one (torch + stdlib only).

Elementwise closeness (|a - e| <= atol + rtol * |e|, as torch.isclose) AND norm-wise relative
error ||a - e|| / ||e||, so that zeros returned for a tiny output fail. Non-finite values must
match exactly (NaN where NaN is expected, the same infinity); a NaN never passes a finite
check. Work is chunked so a huge output never needs more than a few float64 copies of a chunk.

A failing output also says where its wrong elements lie (the first wrong index, and a pattern:
only the tail, a band of columns or rows, one row or column, every k-th element, scattered, all),
and every output says how much of the tolerance its largest error used (the margin on a pass).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import torch

if TYPE_CHECKING:
    from protocol import DiffRecord, Tolerances

CHUNK = 1 << 25
MAX_COLUMNS_COUNTED = 1 << 22  # a per-column tally of wrong elements up to this last-dimension size
STRIDE_DENSITY = 0.5  # every k-th element: at least this share of the k-spaced span is wrong
NEARLY_ALL = 0.99


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


class MismatchLayout:
    """Where the wrong elements of one output lie, gathered chunk by chunk in flat order (so rows
    arrive sorted) without a mask of the whole output: first and last index, the gcd of the gaps,
    the rows touched, and a per-column tally when the last dimension is not huge."""

    def __init__(self, shape: list[int]) -> None:
        self.shape = shape
        self.numel = math.prod(shape)
        self.columns = shape[-1] if len(shape) >= 1 and shape[-1] > 0 else 1
        self.rows = self.numel // self.columns if self.columns else 0
        self.count = 0
        self.first: int | None = None
        self.last: int | None = None
        self.gap_gcd = 0
        self.rows_touched = 0
        self.row_min: int | None = None
        self.row_max: int | None = None
        self.column_counts = (
            torch.zeros(self.columns, dtype=torch.int64) if self.columns <= MAX_COLUMNS_COUNTED else None
        )

    def add(self, elements: torch.Tensor) -> None:
        """Element indices of wrong elements (ascending; duplicates allowed), one chunk's worth."""
        elements = torch.unique_consecutive(elements.to(torch.int64))  # stays on its device
        if self.last is not None:
            elements = elements[elements > self.last]
        if not elements.numel():
            return
        head, tail = int(elements[0]), int(elements[-1])
        gaps = elements[1:] - elements[:-1]
        if self.last is not None:
            gaps = torch.cat([gaps, gaps.new_tensor([head - self.last])])
        self.gap_gcd = math.gcd(self.gap_gcd, _gcd_of(gaps))
        self.first = head if self.first is None else self.first
        self.last = tail
        self.count += elements.numel()
        rows = torch.unique_consecutive(elements // self.columns)
        continued = self.row_max is not None and int(rows[0]) == self.row_max
        self.rows_touched += rows.numel() - (1 if continued else 0)
        self.row_min = int(rows[0]) if self.row_min is None else self.row_min
        self.row_max = int(rows[-1])
        if self.column_counts is not None:
            self.column_counts = self.column_counts.to(elements.device)
            self.column_counts += torch.bincount(elements % self.columns, minlength=self.columns)

    def describe(self) -> tuple[str, str] | None:
        """(pattern, one sentence naming the indices) or None when nothing is wrong."""
        if not self.count or self.first is None or self.last is None:
            return None
        if self.count >= NEARLY_ALL * self.numel:
            share = (
                "every element"
                if self.count == self.numel
                else f"{100 * self.count / self.numel:.3g}% of elements"
            )
            return "all", f"{share} wrong: the kernel's result is wrong everywhere, not at an edge"
        if self.first > 0 and self.last == self.numel - 1 and self.count == self.numel - self.first:
            return (
                "tail",
                f"only the last {self.count} elements (flat index {self.first} on, from "
                f"{_unravel(self.first, self.shape)}) are wrong: the last partial tile or block, "
                "check the bounds test and the tail loop",
            )
        columns = self._wrong_columns()
        if self.rows > 1 and self.rows_touched == 1 and self.row_min is not None:
            return (
                "one_row",
                f"only row {self._row_name(self.row_min)} is wrong (rows are {self._rows_text()})",
            )
        if columns is not None and 0 < len(columns) < self.columns:
            return self._column_pattern(columns)
        if (
            self.row_min is not None
            and self.row_max is not None
            and self.rows_touched == self.row_max - self.row_min + 1
            and self.rows_touched < self.rows
        ):
            where = (
                f"rows {self._row_name(self.row_min)} to {self._row_name(self.row_max)} ({self._rows_text()})"
            )
            if self.row_max == self.rows - 1:
                return "tail_rows", f"only {where} are wrong: the last partial tile of rows"
            return "row_band", f"only {where} are wrong, a band of rows"
        span = (self.last - self.first) // self.gap_gcd + 1 if self.gap_gcd > 1 else 0
        if span and self.count >= STRIDE_DENSITY * span:
            return (
                "stride",
                f"every {self.gap_gcd}th element is wrong (flat index = {self.first % self.gap_gcd} mod "
                f"{self.gap_gcd}): one lane, thread or vector slot per group",
            )
        return (
            "scattered",
            f"{self.count} wrong elements scattered over {self.rows_touched} rows"
            + (f" and {len(columns)} columns" if columns is not None else "")
            + ": a race, uninitialized memory or a precision problem rather than an edge",
        )

    def _wrong_columns(self) -> list[int] | None:
        if self.column_counts is None or self.columns <= 1:
            return None
        return [int(c) for c in torch.nonzero(self.column_counts).flatten()]

    def _column_pattern(self, columns: list[int]) -> tuple[str, str]:
        size = f"of the last dimension (size {self.columns})"
        if len(columns) == 1:
            return "one_column", f"only index {columns[0]} {size} is wrong, in {self.rows_touched} rows"
        if columns[-1] - columns[0] + 1 == len(columns):
            where = f"indices {columns[0]} to {columns[-1]} {size}"
            if columns[-1] == self.columns - 1:
                return "tail_columns", f"only {where} are wrong: the last partial tile along it"
            return "column_band", f"only {where} are wrong, a band of columns"
        if self.gap_gcd > 1 and len(columns) * self.gap_gcd >= self.columns:
            shown = ", ".join(str(c) for c in columns[:4]) + (", ..." if len(columns) > 4 else "")
            return (
                "stride",
                f"every {self.gap_gcd}th element is wrong (indices {shown} {size}): one lane, "
                "thread or vector slot per group",
            )
        shown = ", ".join(str(c) for c in columns[:6]) + (", ..." if len(columns) > 6 else "")
        return "scattered", f"wrong elements in {len(columns)} of {self.columns} indices {size} ({shown})"

    def _row_name(self, row: int) -> str:
        return str(_unravel(row, self.shape[:-1])) if len(self.shape) > 2 else str(row)

    def _rows_text(self) -> str:
        return f"indices over all but the last dimension, {self.rows} of them"


def _gcd_of(values: torch.Tensor) -> int:
    """gcd of non-negative integers, pairwise on the tensor (no Python loop over elements)."""
    values = values.to(torch.int64)
    while values.numel() > 1:
        if values.numel() % 2:
            values = torch.cat([values, values.new_zeros(1)])
        values = torch.gcd(values[0::2], values[1::2])
    return int(values[0]) if values.numel() else 0


def _margin_ratio(diff: torch.Tensor, limit: torch.Tensor, finite: torch.Tensor) -> float:
    """The largest |a - e| / (atol + rtol |e|) over finite elements (inf where the limit is 0)."""
    ratio = torch.where(limit > 0, diff / limit.clamp_min(1e-300), torch.where(diff > 0, math.inf, 0.0))
    ratio = torch.where(finite, ratio, torch.zeros_like(ratio))
    return float(ratio.max()) if ratio.numel() else 0.0


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
    layout = MismatchLayout(list(expected.shape))
    per_element = 2 if expected.is_complex() else 1  # complex: (real, imaginary) per element
    error_ratio = 0.0
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
        wrong = torch.nonzero(over | nonfinite_bad).flatten()
        if wrong.numel():
            layout.add((wrong + start) // per_element)
        error_ratio = max(error_ratio, _margin_ratio(diff, limit, finite))
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
        error_ratio=error_ratio,
        norm_ratio=(norm_err / norm_rtol if norm_rtol > 0 else None) if norm_err is not None else None,
    )
    described = layout.describe()
    if described is not None and layout.first is not None:
        record["first_wrong_index"] = _unravel(layout.first, list(expected.shape))
        record["mismatch_pattern"], record["pattern_detail"] = described
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

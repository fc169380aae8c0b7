"""An OutputDiff as the model and people read it: what failed, where and by how much, or how much
of the tolerance a pass used. Apart from diff.py, which builds OutputDiffs from EvalResult's types,
so that report.py reads diffs without importing results.py (which calls report.py back)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.referee.results import CorrectnessReport, OutputDiff


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def render_diff(diff: OutputDiff) -> str:
    """One paragraph: what failed, where (the first wrong index and the pattern) and by how much;
    for a pass, how much of the tolerance the largest error used."""
    if diff.passed:
        text = f"{diff.output}: ok"
        if diff.max_abs_err is not None:
            text += f" (max abs err {_num(diff.max_abs_err)}, norm-wise {_num(diff.norm_rel_err)})"
        margin = margin_text(diff)
        return text + (f"; {margin}" if margin else "")
    parts = [f"{diff.output}: " + "; ".join(diff.problems)]
    if diff.pattern_detail:
        parts.append(f"pattern: {diff.pattern_detail}")
    if diff.first_wrong_index is not None:
        parts.append(f"first wrong at {diff.first_wrong_index}")
    if diff.worst_index is not None:
        parts.append(
            f"worst at {diff.worst_index}: expected {diff.worst_expected:.6g}, got {diff.worst_actual:.6g}"
        )
    if diff.max_abs_err is not None:
        parts.append(
            f"max abs err {_num(diff.max_abs_err)}, max rel err {_num(diff.max_rel_err)}, "
            f"norm-wise rel err {_num(diff.norm_rel_err)} (limits atol={diff.atol:g} rtol={diff.rtol:g} "
            f"norm={diff.norm_rtol:g})"
        )
    nonfinite = _nonfinite_text(diff)
    if nonfinite:
        parts.append(nonfinite)
    return "; ".join(parts)


def _percent(ratio: float) -> str:
    return f"{100 * ratio:.2g}%" if ratio < 10 else f"{ratio:.3g}x"


def margin_text(diff: OutputDiff) -> str:
    """How much of the tolerance a passing output used: "max error at 3% of the tolerance"."""
    if diff.error_ratio is None:
        return ""
    if diff.error_ratio == 0 and not diff.norm_ratio:
        return "exact (no error)"
    text = f"max error at {_percent(diff.error_ratio)} of the tolerance"
    if diff.norm_ratio is not None:
        text += f", norm-wise error at {_percent(diff.norm_ratio)} of its limit"
    return text


def margin_line(correctness: CorrectnessReport) -> str:
    """One line for a passing verdict: the largest share of the tolerance any output used in any
    trial or timed call, and where ("passed with max error at 3% of the tolerance")."""
    worst: tuple[float, str, OutputDiff] | None = None
    for trial in [*correctness.trials, *correctness.rechecks]:
        where = f"trial {trial.index}" if trial.kind == "trial" else f"timed call {trial.index}"
        for diff in trial.outputs:
            used = max(diff.error_ratio or 0.0, diff.norm_ratio or 0.0)
            if diff.error_ratio is not None and (worst is None or used > worst[0]):
                worst = (used, where, diff)
    if worst is None:
        return ""
    used, where, diff = worst
    margin = margin_text(diff)
    if margin.startswith("exact"):
        return "correctness: passed exactly (no error in any output)"
    return f"correctness: passed with {margin} ({diff.output}, {where})"


def _nonfinite_text(diff: OutputDiff) -> str:
    if not diff.nonfinite_mismatches:
        return ""
    text = (
        f"{diff.nonfinite_mismatches} non-finite values where the reference differs "
        f"(NaN: {diff.actual_nan} got, {diff.expected_nan} expected; "
        f"Inf: {diff.actual_inf} got, {diff.expected_inf} expected)"
    )
    if diff.actual_nan and not diff.expected_nan:
        text += "; NaN where a value is expected usually means output elements were never written"
    return text

"""OutputDiff from tensors (pure torch: runs on CPU tensors in tests); its text is diff_text.py.

The numbers come from sandbox/workers/referee/compare.py, the module the judge worker runs, so what is
tested here is what judges.
"""

from __future__ import annotations

from typing import Any

from agent.referee.diff_text import margin_line, margin_text, render_diff
from agent.referee.policy import TolerancePolicy, tolerance_policy
from agent.referee.results import OutputDiff
from sandbox.workers.protocol import DiffRecord
from sandbox.workers.referee.compare import compare_tensors, compare_values


def output_diff(name: str, record: DiffRecord) -> OutputDiff:
    """An OutputDiff from a compare.py record (as the judge worker returns it)."""
    fields: dict[str, Any] = {k: v for k, v in record.items() if k in OutputDiff.model_fields}
    return OutputDiff(output=name, **fields)


def diff_outputs(
    expected: Any, actual: Any, tolerance: str | TolerancePolicy = "default"
) -> list[OutputDiff]:
    """Compare flat sequences of output leaves (tensors or Python scalars), one diff per leaf."""
    import torch

    policy = tolerance_policy(tolerance)
    expected_leaves = list(expected) if isinstance(expected, list | tuple) else [expected]
    actual_leaves = list(actual) if isinstance(actual, list | tuple) else [actual]
    if len(expected_leaves) != len(actual_leaves):
        return [
            OutputDiff(
                output="outputs",
                passed=False,
                problems=[f"{len(actual_leaves)} outputs where {len(expected_leaves)} are expected"],
            )
        ]
    diffs = []
    for index, (want, got) in enumerate(zip(expected_leaves, actual_leaves, strict=True)):
        name = f"output {index}"
        if isinstance(want, torch.Tensor):
            if type(got) is not torch.Tensor:
                diffs.append(
                    OutputDiff(
                        output=name,
                        passed=False,
                        type_actual=type(got).__name__,
                        problems=[f"a {type(got).__name__} where a plain torch.Tensor is expected"],
                    )
                )
                continue
            tol = policy.for_dtype(str(want.dtype).removeprefix("torch."))
            record = compare_tensors(want, got, atol=tol.atol, rtol=tol.rtol, norm_rtol=tol.norm_rtol)
        else:
            tol = policy.for_dtype("float32")
            record = compare_values(want, got, atol=tol.atol, rtol=tol.rtol)
        diffs.append(output_diff(name, record))
    return diffs


__all__ = ["diff_outputs", "margin_line", "margin_text", "output_diff", "render_diff"]

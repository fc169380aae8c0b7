"""Where a wrong output's errors lie (the pattern the judge names) and the margin of a pass."""

from __future__ import annotations

import pytest
import torch

from agent.referee.diff import diff_outputs, margin_line, render_diff
from agent.referee.policy import tolerance_policy
from agent.referee.results import CorrectnessReport, OutputDiff, TrialReport
from sandbox.workers.referee import compare


def one(expected: torch.Tensor, actual: torch.Tensor) -> OutputDiff:
    (diff,) = diff_outputs([expected], [actual])
    return diff


def broken(shape: tuple[int, ...], where: object) -> tuple[torch.Tensor, torch.Tensor]:
    expected = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    actual = expected.clone()
    actual[where] += 5.0  # type: ignore[index]
    return expected, actual


@pytest.mark.parametrize(
    ("shape", "where", "pattern", "words"),
    [
        ((1000,), slice(968, None), "tail", "only the last 32 elements"),
        ((40, 50), (slice(None), slice(48, None)), "tail_columns", "indices 48 to 49 of the last dimension"),
        ((40, 50), (slice(None), slice(10, 20)), "column_band", "indices 10 to 19"),
        ((40, 50), (slice(32, None), slice(None)), "tail", "only the last 400 elements"),
        ((40, 50), (slice(8, 16), slice(None)), "row_band", "rows 8 to 15"),
        ((40, 50), (7, slice(None)), "one_row", "only row 7"),
        ((40, 50), (slice(None), 3), "one_column", "only index 3 of the last dimension (size 50)"),
        ((4096,), slice(5, None, 32), "stride", "every 32th element"),
        ((64, 64), (slice(None), slice(0, None, 32)), "stride", "indices 0, 32"),
        ((40, 50), (slice(None), slice(None)), "all", "every element wrong"),
    ],
)
def test_each_pattern_is_named_with_its_indices(
    shape: tuple[int, ...], where: object, pattern: str, words: str
) -> None:
    diff = one(*broken(shape, where))
    assert not diff.passed
    assert diff.mismatch_pattern == pattern, diff.pattern_detail
    assert words in (diff.pattern_detail or "")
    assert f"pattern: {diff.pattern_detail}" in render_diff(diff)


def test_rows_of_a_four_dimensional_output_are_named_by_their_leading_indices() -> None:
    diff = one(*broken((2, 3, 8, 16), (1, 2, 5, slice(None))))
    assert diff.mismatch_pattern == "one_row" and "[1, 2, 5]" in (diff.pattern_detail or "")
    assert diff.first_wrong_index == [1, 2, 5, 0]


def test_scattered_errors_are_called_scattered() -> None:
    expected = torch.randn(64, 64)
    actual = expected.clone()
    for flat in (3, 700, 1290, 2047, 3001, 4000):
        actual.view(-1)[flat] += 1.0
    diff = one(expected, actual)
    assert diff.mismatch_pattern == "scattered" and diff.first_wrong_index == [0, 3]
    assert "first wrong at [0, 3]" in render_diff(diff)


def test_the_first_wrong_index_is_multidimensional_and_first_in_flat_order() -> None:
    expected = torch.zeros(3, 4, 5)
    actual = expected.clone()
    actual[2, 0, 1] = 1.0
    actual[1, 3, 4] = 9.0  # earlier in flat order, and the worst
    actual[2, 3, 0] = 1.0
    diff = one(expected, actual)
    assert diff.first_wrong_index == [1, 3, 4]


def test_the_pattern_is_the_same_when_the_output_spans_many_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare, "CHUNK", 7)  # rows and strides cross chunk boundaries
    for where, pattern in (((slice(None), 3), "one_column"), ((slice(2, 5), slice(None)), "row_band")):
        diff = one(*broken((10, 12), where))
        assert diff.mismatch_pattern == pattern, diff.pattern_detail
    diff = one(*broken((999,), slice(1, None, 16)))
    assert diff.mismatch_pattern == "stride" and "every 16th" in (diff.pattern_detail or "")


def test_a_complex_output_names_element_indices() -> None:
    expected = torch.randn(8, 8, dtype=torch.complex64)
    actual = expected.clone()
    actual[:, 6:] += 3.0
    diff = one(expected, actual)
    assert diff.mismatch_pattern == "tail_columns" and diff.first_wrong_index == [0, 6]


def test_a_pass_states_its_margin_of_the_tolerance() -> None:
    tol = tolerance_policy("default").for_dtype("float32")
    expected = torch.ones(16, 16)
    actual = expected + 0.03 * (tol.atol + tol.rtol)  # 3% of atol + rtol * |1|
    diff = one(expected, actual)
    assert diff.passed and diff.mismatch_pattern is None
    assert diff.error_ratio == pytest.approx(0.03, rel=1e-3)
    assert "max error at 3% of the tolerance" in render_diff(diff)
    report = CorrectnessReport(
        passed=True,
        trials_requested=2,
        trials_run=2,
        tolerance=tolerance_policy("default"),
        trials=[
            TrialReport(index=0, passed=True, outputs=[one(expected, expected.clone())]),
            TrialReport(index=1, passed=True, outputs=[diff]),
        ],
    )
    line = margin_line(report)
    assert line.startswith("correctness: passed with max error at 3% of the tolerance")
    assert "(output 0, trial 1)" in line


def test_an_exact_pass_says_exact() -> None:
    x = torch.arange(12).reshape(3, 4)
    diff = one(x, x.clone())
    assert diff.passed and diff.error_ratio == 0 and "exact" in render_diff(diff)


def test_an_error_over_the_tolerance_reads_as_a_multiple() -> None:
    diff = one(torch.zeros(4), torch.full((4,), 1.0))
    assert diff.error_ratio is not None and diff.error_ratio > 10
    assert diff.mismatch_pattern == "all"

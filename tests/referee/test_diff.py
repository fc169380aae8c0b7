"""Output comparison: elementwise AND norm-wise, non-finite values, shapes, dtypes, the text."""

from __future__ import annotations

import math

import pytest
import torch

from agent.referee.diff import diff_outputs, render_diff
from sandbox.workers.referee import compare


def one(expected: object, actual: object, tolerance: str = "default"):
    (diff,) = diff_outputs([expected], [actual], tolerance)
    return diff


def test_exact_match_passes_with_zero_errors() -> None:
    x = torch.randn(8, 16)
    diff = one(x, x.clone())
    assert diff.passed and diff.max_abs_err == 0 and diff.norm_rel_err == 0 and diff.mismatch_count == 0


def test_zeros_for_a_tiny_output_fail_only_on_the_norm_wise_error() -> None:
    tiny = torch.softmax(torch.randn(4, 65536), dim=-1)
    diff = one(tiny, torch.zeros_like(tiny))
    assert diff.mismatch_count == 0  # allclose(atol=1e-2) alone would pass
    assert not diff.passed and diff.norm_rel_err == pytest.approx(1.0)
    assert any("norm-wise relative error 1 above 0.01" in p for p in diff.problems)


def test_small_relative_noise_passes() -> None:
    x = torch.randn(64, 64)
    diff = one(x, x * (1 + 1e-4))
    assert diff.passed and 0 < diff.norm_rel_err < 1e-3  # type: ignore[operator]


def test_the_worst_element_is_located_with_both_values() -> None:
    x = torch.randn(6, 7)
    y = x.clone()
    y[4, 2] += 3.0
    y[1, 1] += 0.5
    diff = one(x, y)
    assert not diff.passed and diff.mismatch_count == 2 and diff.mismatch_fraction == pytest.approx(2 / 42)
    assert diff.worst_index == [4, 2]
    assert diff.worst_expected == pytest.approx(float(x[4, 2])) and diff.worst_actual == pytest.approx(
        float(y[4, 2])
    )
    assert diff.max_abs_err == pytest.approx(3.0)
    text = render_diff(diff)
    assert "2 of 42 elements" in text and "worst at [4, 2]" in text and "max abs err 3" in text


def test_nan_where_a_value_is_expected_fails_and_says_unwritten() -> None:
    x = torch.randn(10, 10)
    y = x.clone()
    y[2:4] = float("nan")
    diff = one(x, y)
    assert not diff.passed
    assert diff.actual_nan == 20 and diff.expected_nan == 0 and diff.nonfinite_mismatches == 20
    assert diff.mismatch_count == 20 and diff.worst_index == [2, 0] and math.isnan(diff.worst_actual)  # type: ignore[arg-type]
    assert "never written" in render_diff(diff)


def test_matching_nan_and_inf_pass_but_a_flipped_infinity_fails() -> None:
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert one(x, x.clone()).passed
    flipped = x.clone()
    flipped[2] = -float("inf")
    diff = one(x, flipped)
    assert not diff.passed and diff.nonfinite_mismatches == 1 and diff.worst_index == [2]


def test_nan_expected_but_a_number_returned_fails() -> None:
    x = torch.tensor([1.0, float("nan")])
    diff = one(x, torch.tensor([1.0, 0.0]))
    assert not diff.passed and diff.expected_nan == 1 and diff.actual_nan == 0


def test_shape_mismatch_is_spelled_out_and_broadcasting_refused() -> None:
    diff = one(torch.randn(4, 8), torch.randn(4, 1))
    assert not diff.passed and diff.max_abs_err is None
    assert diff.problems == ["shape [4, 1] where [4, 8] is expected (a broadcastable shape is not accepted)"]


def test_dtype_mismatch_fails_even_when_values_match() -> None:
    x = torch.randn(16)
    diff = one(x, x.half())
    assert not diff.passed and diff.dtype_actual == "float16"
    assert "dtype float16 where float32 is expected" in diff.problems


def test_a_subclass_output_fails() -> None:
    class Sub(torch.Tensor):
        pass

    x = torch.randn(3)
    diff = one(x, x.clone().as_subclass(Sub))
    assert not diff.passed and "plain torch.Tensor" in diff.problems[0]


def test_integer_outputs_must_match_exactly() -> None:
    x = torch.arange(10)
    assert one(x, x.clone()).passed
    off_by_one = x.clone()
    off_by_one[3] += 1
    assert not one(x, off_by_one).passed


def test_scalar_outputs_and_output_counts() -> None:
    assert diff_outputs([torch.ones(2), 3], [torch.ones(2), 3])[1].passed
    assert not diff_outputs([1.5], [2.5])[0].passed
    (count,) = diff_outputs([torch.ones(2), torch.ones(2)], [torch.ones(2)])
    assert count.problems == ["1 outputs where 2 are expected"]


def test_tight_tolerance_is_stricter_than_default() -> None:
    x = torch.randn(256)
    y = x + 1e-3
    assert one(x, y, "default").passed
    assert not one(x, y, "tight").passed


def test_chunked_statistics_equal_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.randn(1000)
    y = x + torch.randn(1000) * 0.05
    y[777] = float("nan")
    whole = compare.compare_tensors(x, y, atol=1e-2, rtol=1e-2, norm_rtol=1e-2)
    monkeypatch.setattr(compare, "CHUNK", 64)
    chunked = compare.compare_tensors(x, y, atol=1e-2, rtol=1e-2, norm_rtol=1e-2)
    for key in ("mismatch_count", "worst_index", "actual_nan", "nonfinite_mismatches"):
        assert chunked[key] == whole[key]
    for key in ("max_abs_err", "max_rel_err", "norm_rel_err"):
        assert chunked[key] == pytest.approx(whole[key])


def test_reference_of_all_zeros_has_no_norm_error_and_uses_elementwise() -> None:
    zeros = torch.zeros(5)
    diff = one(zeros, torch.full((5,), 1e-3))
    assert diff.passed and diff.norm_rel_err is None
    assert not one(zeros, torch.full((5,), 1.0)).passed

"""The precision policy wired into the referee (docs/precision.md): `EvalOptions.precision` and its
tolerances, the baseline cache keyed by precision, and the judge's effective-precision check end to
end on the CPU (real worker processes; TF32 emulated by rounding, as there is no TF32 off the GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)

# isort: split
from precision_check import baseline_model, measure

from agent.cli.common import PRECISION_CHOICES
from agent.referee import EvalOptions
from agent.referee.baselines import BaselineCache, Baselines
from agent.referee.options import validation_message
from agent.referee.policy import PRECISIONS
from agent.referee.results import TimingStats
from tests.referee.conftest import JudgeCpu


def test_fp32_is_the_default_with_the_policy_tables_tolerances() -> None:
    assert EvalOptions().precision == "fp32"
    float32 = {
        p: EvalOptions(precision=p).tolerances().for_dtype("float32").as_list()  # type: ignore[arg-type]
        for p in PRECISIONS
    }
    assert float32 == {
        "fp32": [1e-3, 1e-3, 1e-4],
        "tf32": [1e-3, 1e-3, 1e-3],
        "fp16": [1e-2, 1e-2, 2e-2],
        "bf16": [2e-2, 2e-2, 2e-2],
        "match": [2e-2, 2e-2, 2e-2],
    }
    # outputs in other dtypes keep their limits; an explicit tolerance name overrides the precision's
    assert EvalOptions().tolerances().for_dtype("int64").as_list() == [0, 0, 0]
    assert EvalOptions(precision="tf32", tolerance="tight").tolerances().name == "tight"


def test_an_unknown_precision_is_refused_in_one_line() -> None:
    with pytest.raises(ValidationError) as refused:
        EvalOptions(precision="fp8")  # type: ignore[arg-type]
    message = validation_message(refused.value)
    assert "unknown precision 'fp8'" in message and "fp32, tf32, fp16, bf16, match" in message


def test_the_cli_knows_the_referees_precisions() -> None:
    assert PRECISION_CHOICES == PRECISIONS


def _plan(cache: BaselineCache, precision: str) -> Baselines:
    return Baselines.plan(
        cache,
        task_sha256="t",
        input_spec="s",
        gpu="g",
        torch="2",
        compile_mode=None,
        timing="{}",
        refresh=False,
        configured_bandwidth=None,
        precision=precision,
    )


STATS = TimingStats(
    median_ms=1.0, q1_ms=1.0, q3_ms=1.0, iqr_ms=0.0, mean_ms=1.0, std_ms=0.0, cv=0.0, min_ms=1.0,
    max_ms=1.0, n=5, warmup=1, method="host_clock", l2_flush=False, host_median_ms=1.0,
)  # fmt: skip


def test_a_baseline_is_cached_per_precision(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path / "baselines.json")
    fp32 = _plan(cache, "fp32")
    fp32.resolve({"ok": True, "failure": None, "stages": {}, "baselines": {"eager": STATS.model_dump()}})  # type: ignore[typeddict-item]
    assert _plan(cache, "fp32").cached["eager"] is not None
    assert _plan(cache, "tf32").cached["eager"] is None  # a TF32 baseline is another number
    assert _plan(cache, "tf32").request(measure_bandwidth=False)["baselines"]["eager"] is True


def test_under_match_the_baselines_are_timed_at_the_measured_precision_and_cached_under_it(
    tmp_path: Path,
) -> None:
    cache = BaselineCache(tmp_path / "baselines.json")
    _plan(cache, "tf32").resolve(
        {"ok": True, "failure": None, "stages": {}, "baselines": {"eager": STATS.model_dump()}}  # type: ignore[typeddict-item]
    )
    match = _plan(cache, "match")
    assert match.cached["eager"] is None  # the precision is not known before the judge measured it
    match.resolve(
        {
            "ok": True,
            "failure": None,
            "stages": {},
            "baselines": {"eager": STATS.model_copy(update={"median_ms": 2.0}).model_dump()},  # type: ignore[typeddict-item]
            "baseline_precision": "bf16",
        }
    )
    bf16 = _plan(cache, "bf16").cached["eager"]
    assert bf16 is not None and bf16.stats is not None and bf16.stats.median_ms == 2.0
    tf32 = _plan(cache, "tf32").cached["eager"]
    assert tf32 is not None and tf32.stats is not None and tf32.stats.median_ms == 1.0


# -- the judge, end to end on the CPU ----------------------------------------------------------


@pytest.mark.slow
def test_an_honest_fp32_candidate_is_measured_fp32_and_passes(judge_cpu: JudgeCpu) -> None:
    result = judge_cpu("matmul_long_k", "matmul_numpy", trials=1)
    assert result.verdict == "correct", result.feedback()
    check = result.precision_check
    assert result.precision == "fp32" and check is not None
    assert (check.measured, check.ok, check.baseline_precision) == ("fp32", True, "fp32")
    assert set(check.ladder) >= {"fp32"} and check.error is not None and check.error < 1e-6
    assert "precision (fp32): error" in result.feedback()


@pytest.mark.slow
def test_a_tf32_gemm_within_the_fp32_tolerance_is_rejected_under_fp32(judge_cpu: JudgeCpu) -> None:
    result = judge_cpu("matmul_long_k", "matmul_tf32_operands", trials=1, profile=False)
    assert result.verdict == "incorrect", result.feedback()
    assert result.correctness is not None and result.correctness.passed  # the tolerance let it through
    assert result.reason.startswith("error consistent with TF32 accumulation")
    assert result.reason.endswith("allowed: FP32")


@pytest.mark.slow
def test_a_bf16_gemm_outside_the_fp32_tolerance_is_told_its_precision_not_just_its_diff(
    judge_cpu: JudgeCpu,
) -> None:
    """The H100 run of 2026-12-07: on centred inputs a reduced-precision GEMM fails FP32's tolerance
    outright, and its precision must still be measured: it is the cause the model can act on."""
    result = judge_cpu("matmul_long_k", "matmul_bf16", trials=1, profile=False)
    assert result.verdict == "incorrect", result.feedback()
    assert result.correctness is not None and not result.correctness.passed
    check = result.precision_check
    assert check is not None and (check.measured, check.ok) == ("bf16", False), check
    assert result.reason.startswith("error consistent with BF16") and result.reason.endswith("allowed: FP32")
    assert "outside atol" in result.feedback()  # the diff is still there to read


@pytest.mark.slow
def test_a_tf32_gemm_passes_under_tf32_against_tf32_baselines(judge_cpu: JudgeCpu) -> None:
    result = judge_cpu("matmul_long_k", "matmul_tf32_operands", trials=1, precision="tf32")
    assert result.verdict == "correct", result.feedback()
    assert result.precision_check is not None and result.precision_check.baseline_precision == "tf32"
    assert "precision tf32: baselines at TF32" in result.reason
    assert result.performance is not None and result.performance.eager is not None


@pytest.mark.slow
def test_bf16_is_rejected_under_fp16_and_under_match_timed_against_bf16(judge_cpu: JudgeCpu) -> None:
    fp16 = judge_cpu("matmul_long_k", "matmul_bf16", trials=1, precision="fp16", profile=False)
    assert fp16.verdict == "incorrect", fp16.feedback()
    assert "consistent with BF16" in fp16.reason and fp16.reason.endswith("allowed: FP16")
    match = judge_cpu("matmul_long_k", "matmul_bf16", trials=1, precision="match")
    assert match.verdict == "correct", match.feedback()
    check = match.precision_check
    assert check is not None and (check.measured, check.baseline_precision) == ("bf16", "bf16")
    assert "speedups stated against the baselines at BF16" in check.line
    assert match.performance is not None and match.performance.eager is not None


# -- the judge's check, in-process -------------------------------------------------------------


def _gemm_case() -> tuple[torch.nn.Module, list[torch.Tensor], torch.Tensor]:
    class Gemm(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a @ b

    gen = torch.Generator().manual_seed(0)
    inputs = [torch.rand(16, 2048, generator=gen), torch.rand(2048, 16, generator=gen)]
    return Gemm(), inputs, inputs[0] @ inputs[1]


def test_an_answer_worse_than_bf16_fails_every_policy_even_match() -> None:
    model, inputs, expected = _gemm_case()
    noisy = expected * (1 + 0.05 * torch.randn(expected.shape, generator=torch.Generator().manual_seed(1)))
    for policy in PRECISIONS:
        record = measure(model, lambda: [t.clone() for t in inputs], [expected], [noisy], policy)
        assert (record["measured"], record["ok"]) == ("below_bf16", False), record


def test_outputs_with_nothing_to_measure_are_said_so_and_pass() -> None:
    model, inputs, expected = _gemm_case()
    record = measure(model, lambda: inputs, [expected.argmax(dim=1)], [expected.argmax(dim=1)], "fp32")
    assert record["measured"] is None and record["ok"] and "no floating-point output" in record["line"]


def test_fp16_baselines_run_under_autocast() -> None:
    model, inputs, _ = _gemm_case()
    wrapped = baseline_model(model, "bf16", "cpu")
    assert wrapped(*inputs).dtype == torch.bfloat16  # autocast ran the matmul in the format
    assert baseline_model(model, "tf32", "cpu") is model

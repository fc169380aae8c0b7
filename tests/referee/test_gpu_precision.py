"""On a GPU: the precision policy end to end (docs/precision.md). An honest FP32 GEMM, a TF32 one,
an FP16 one and a BF16 one (torch-written candidates under the kernelbench policy, so no build is
needed), judged under fp32, tf32, fp16 and match; and our ReLU example under the default.
Run with `pytest -m gpu tests/referee/test_gpu_precision.py`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from agent.referee import EvalOptions, EvalResult, evaluate
from agent.referee.baselines import BaselineCache
from tests.referee.conftest import TASKS, copy_candidate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
GEMM = TASKS / "matmul_long_k.py"


@pytest.fixture(scope="module")
def gpu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("referee-gpu-precision")


@pytest.fixture(scope="module")
def baselines(gpu_dir: Path) -> BaselineCache:
    return BaselineCache(gpu_dir / "baselines.json")


def judge(candidate: str, gpu_dir: Path, baselines: BaselineCache, **options: object) -> EvalResult:
    solution = copy_candidate(candidate, gpu_dir / candidate)
    options.setdefault("policy", "kernelbench")
    options.setdefault("trials", 2)
    options.setdefault("compile_mode", None)
    return evaluate(GEMM, solution, EvalOptions(**options), baseline_cache=baselines)  # type: ignore[arg-type]


def test_an_honest_fp32_gemm_is_fp32_on_the_gpus_ladder(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge("matmul_torch", gpu_dir, baselines)
    assert result.verdict == "correct", result.feedback()
    check = result.precision_check
    assert check is not None and check.measured == "fp32" and check.ok, check
    # the GPU's own rungs: TF32 GEMMs sit orders of magnitude above FP32's error
    tf32 = next(error for name, error in check.ladder.items() if "tf32" in name.split("/"))
    assert tf32 > 100 * check.ladder["fp32"], check.ladder


def test_a_tf32_gemm_is_rejected_under_fp32_and_passes_under_tf32(
    gpu_dir: Path, baselines: BaselineCache
) -> None:
    strict = judge("matmul_torch_tf32", gpu_dir, baselines, profile=False)
    assert strict.verdict == "incorrect", strict.feedback()
    assert "consistent with TF32" in strict.reason and strict.reason.endswith("allowed: FP32")
    allowed = judge("matmul_torch_tf32", gpu_dir, baselines, precision="tf32")
    assert allowed.verdict == "correct", allowed.feedback()
    check = allowed.precision_check
    assert check is not None and check.baseline_precision == "tf32"
    assert allowed.performance is not None and allowed.performance.eager is not None


def test_an_fp16_gemm_passes_under_fp16_and_match_only(gpu_dir: Path, baselines: BaselineCache) -> None:
    strict = judge("matmul_torch_half", gpu_dir, baselines, profile=False)
    assert strict.verdict == "incorrect", strict.feedback()
    under_fp16 = judge("matmul_torch_half", gpu_dir, baselines, precision="fp16")
    assert under_fp16.verdict == "correct", under_fp16.feedback()
    match = judge("matmul_torch_half", gpu_dir, baselines, precision="match")
    assert match.verdict == "correct", match.feedback()
    check = match.precision_check
    assert check is not None and check.baseline_precision in ("tf32", "fp16"), check  # one class on a GEMM
    assert match.performance is not None and match.performance.eager is not None


def test_a_bf16_gemm_is_rejected_under_fp16_and_timed_against_bf16_under_match(
    gpu_dir: Path, baselines: BaselineCache
) -> None:
    under_fp16 = judge("matmul_torch_bf16", gpu_dir, baselines, precision="fp16", profile=False)
    assert under_fp16.verdict == "incorrect", under_fp16.feedback()
    assert "consistent with BF16" in under_fp16.reason
    match = judge("matmul_torch_bf16", gpu_dir, baselines, precision="match")
    assert match.verdict == "correct", match.feedback()
    assert match.precision_check is not None and match.precision_check.baseline_precision == "bf16"


def test_the_relu_example_is_fp32_under_the_default(gpu_dir: Path, baselines: BaselineCache) -> None:
    relu = ROOT / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
    example = shutil.copytree(ROOT / "skills" / "cuda-extension" / "examples" / "relu", gpu_dir / "relu")
    result = evaluate(relu, example, EvalOptions(trials=3, profile=False), baseline_cache=baselines)
    assert result.verdict == "correct", result.feedback()
    check = result.precision_check
    assert check is not None and (check.measured, check.ok) == ("fp32", True), check
    assert result.correctness is not None and len(result.correctness.hidden_transforms) > 1

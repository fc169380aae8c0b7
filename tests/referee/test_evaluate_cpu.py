"""End to end on the CPU: the real candidate worker (through the local sandbox) and the real judge,
with python-only candidates. GPU-only parts (poisoning, events, kernels) are in test_gpu.py."""

from __future__ import annotations

import importlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent.workspace import SingleFileSolution
from sandbox.paths import gpu_gate_dir
from sandbox.workers.gpu.gpu_gate import GpuGate, gate_files
from sandbox.workers.referee.candidate_child import WAIT_TO_RUN
from tests.referee.conftest import PYTHON_CANDIDATES, JudgeCpu

pytestmark = pytest.mark.slow


def test_honest_candidate_is_correct_and_timed(judge_cpu: JudgeCpu) -> None:
    result = judge_cpu("relu_small", "relu_numpy")
    assert result.verdict == "correct", result.feedback()
    assert result.correctness is not None and result.correctness.trials_run == 3
    assert all(d.max_abs_err == 0.0 for t in result.correctness.trials for d in t.outputs)
    assert len(result.correctness.rechecks) == 2 and all(r.passed for r in result.correctness.rechecks)
    perf = result.performance
    assert perf is not None and perf.eager is not None and perf.compile is None
    assert perf.candidate.method == "host_clock" and perf.candidate.n >= 5
    assert perf.speedup_vs_eager is not None
    assert result.policy_report is not None and result.policy_report.forbidden == {}
    # where the judge's time went, its exit included: a batch's per-stage report adds these up
    judge_stages = result.stage_times.judge_stages
    assert {
        "receiving the handed-over outputs",
        "reference",
        "comparisons",
        "eager timing",
        "exiting",
    } <= set(judge_stages)
    assert 0 <= judge_stages["exiting"] <= result.stage_times.judge_s
    assert sum(judge_stages.values()) <= result.stage_times.judge_s + 0.01


def test_baselines_come_from_the_cache_the_second_time(judge_cpu: JudgeCpu) -> None:
    first = judge_cpu("relu_small", "relu_numpy", trials=1)
    second = judge_cpu("relu_small", "relu_numpy", trials=1)
    assert first.performance and first.performance.eager and not first.performance.eager.cached
    assert second.performance and second.performance.eager and second.performance.eager.cached
    assert second.performance.eager.median_ms == first.performance.eager.median_ms
    refreshed = judge_cpu("relu_small", "relu_numpy", trials=1, refresh_baselines=True)
    assert refreshed.performance and refreshed.performance.eager and not refreshed.performance.eager.cached


def test_torch_glue_is_a_violation_under_strict_only(judge_cpu: JudgeCpu) -> None:
    strict = judge_cpu("relu_small", "relu_torch", profile=False)
    assert strict.verdict == "policy_violation"
    assert strict.policy_report is not None and "aten.relu.default" in strict.policy_report.forbidden
    assert "aten.relu.default x3" in strict.reason
    glue = judge_cpu("relu_small", "relu_torch", policy="kernelbench", profile=False)
    assert glue.verdict == "correct", glue.feedback()
    assert glue.policy_report is not None and glue.policy_report.ops["aten.relu.default"] == 3


def test_torch_hidden_inside_a_custom_operator_is_seen(judge_cpu: JudgeCpu) -> None:
    result = judge_cpu("relu_small", "custom_op_hides_torch", profile=False)
    assert result.verdict == "policy_violation", result.feedback()
    report = result.policy_report
    assert report is not None
    assert not any(name.startswith("aten.relu") for name in report.ops)  # the mode saw only the custom op
    assert "aten::relu" in report.forbidden


def test_zeros_for_tiny_outputs_fail_on_the_norm_wise_error(judge_cpu: JudgeCpu) -> None:
    # fp16's atol of 1e-2: fp32's 1e-3 is close to softmax's largest outputs on these inputs
    result = judge_cpu("softmax_tiny", "zeros", profile=False, precision="fp16")
    assert result.verdict == "incorrect"
    diff = result.correctness.trials[0].outputs[0]  # type: ignore[union-attr]
    assert diff.mismatch_count == 0  # every element is within atol=1e-2 ...
    assert diff.norm_rel_err == pytest.approx(1.0)  # ... yet nothing of the output is there
    assert "norm-wise relative error" in result.reason


def test_an_output_never_written_reads_nan(judge_cpu: JudgeCpu) -> None:
    result = judge_cpu("relu_small", "empty_output", profile=False)
    assert result.verdict == "incorrect"
    diff = result.correctness.trials[0].outputs[0]  # type: ignore[union-attr]
    assert diff.actual_nan == diff.numel
    assert "never written" in result.feedback()


def test_one_wrong_element_is_located(judge_cpu: JudgeCpu) -> None:
    result = judge_cpu("relu_small", "wrong_values", profile=False)
    assert result.verdict == "incorrect"
    diff = result.correctness.trials[0].outputs[0]  # type: ignore[union-attr]
    assert diff.mismatch_count == 1 and diff.worst_index == [3, 5]
    assert diff.worst_actual == pytest.approx(diff.worst_expected + 7.0)  # type: ignore[operator]
    assert "worst at [3, 5]" in result.feedback()


@pytest.mark.parametrize(
    ("task", "candidate", "policy", "expected_text"),
    [
        ("relu_small", "mutate_inputs", "strict", "changed input(s) 0 in place"),
        ("identity_nonneg", "alias_input", "strict", "output 0 shares memory with input 0"),
        ("relu_small", "subclass_output", "kernelbench", "where a plain torch.Tensor is expected"),
        ("relu_small", "wrong_shape", "strict", "shape [64, 1] where [64, 256] is expected"),
        ("layernorm_small", "layernorm_default_params", "kernelbench", "outside atol=0.001 rtol=0.001"),
    ],
)
def test_incorrect_outputs_say_why(
    judge_cpu: JudgeCpu, task: str, candidate: str, policy: str, expected_text: str
) -> None:
    result = judge_cpu(task, candidate, policy=policy, profile=False)
    assert result.verdict == "incorrect", result.feedback()
    assert expected_text in result.feedback()


def test_parameters_are_randomized_and_must_load(judge_cpu: JudgeCpu) -> None:
    honest = judge_cpu("layernorm_small", "layernorm_honest", policy="kernelbench", profile=False)
    assert honest.verdict == "correct", honest.feedback()
    missing = judge_cpu("layernorm_small", "layernorm_no_params", policy="kernelbench", profile=False)
    assert missing.verdict == "runtime_error"
    assert missing.failure is not None and missing.failure.kind == "state_mismatch"
    assert "norm.weight" in missing.reason


@pytest.mark.parametrize(
    ("candidate", "verdict", "kind", "expected_text"),
    [
        ("raises", "runtime_error", "exception", "ValueError: boom from the candidate"),
        ("import_error", "runtime_error", "exception", "No module named 'kernel_agent_no_such_module'"),
        ("segfault", "runtime_error", "signal", "SIGSEGV during trial 0"),
        (
            "exit0",
            "runtime_error",
            "early_exit",
            "exited (status 0) during trial 0 without a completion record",
        ),
        ("forge_print", "policy_violation", "forged_record", "imitating a worker result record"),
        ("forge_record", "policy_violation", "forged_record", "failed authentication"),
    ],
)
def test_broken_candidates_fail_with_their_reason(
    judge_cpu: JudgeCpu, candidate: str, verdict: str, kind: str, expected_text: str
) -> None:
    result = judge_cpu("relu_small", candidate, policy="kernelbench", trials=1)
    assert result.verdict == verdict, result.feedback()
    assert result.failure is not None and result.failure.kind == kind
    assert expected_text in result.reason or expected_text in result.failure.detail
    assert result.correctness is None and result.performance is None


def test_a_hang_times_out_and_the_next_evaluation_works(judge_cpu: JudgeCpu) -> None:
    hung = judge_cpu("relu_small", "hang", run_timeout_s=20.0, trials=1)
    assert hung.verdict == "timeout"
    assert hung.failure is not None and "during trial 0" in hung.failure.message
    after = judge_cpu("relu_small", "relu_numpy", trials=1, profile=False)
    assert after.verdict == "correct"


@pytest.mark.parametrize(
    ("candidate", "expected_text"),
    [
        ("patch_randn", "differ from the seeded inputs"),
        ("tf32_flag", "cuda.matmul.allow_tf32 False -> True"),
        ("thread", "started Python threads (candidate-helper)"),
    ],
)
def test_process_tampering_is_reported(judge_cpu: JudgeCpu, candidate: str, expected_text: str) -> None:
    result = judge_cpu("relu_small", candidate, trials=2, profile=False)
    assert result.verdict in ("incorrect", "policy_violation"), result.feedback()
    assert result.policy_report is not None
    assert any(expected_text in v for v in result.policy_report.violations), result.policy_report.violations


def test_the_candidate_starts_while_another_evaluation_holds_the_gpu(
    judge_cpu: JudgeCpu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate's supervisor takes the GPU gate when its child asks, after importing torch and
    before any GPU work or candidate code, not before starting it: seconds of startup no longer hold
    up other evaluations' timing (the gate's drains were most of a full-size batch's GPU waits)."""
    gate = gpu_gate_dir() / "gpu-test.lock"
    gate.parent.mkdir(parents=True, exist_ok=True)
    for name in gate_files(str(gate)):
        Path(name).touch()
    # agent.referee exports a function named evaluate: the module itself, by its full name
    evaluate = importlib.import_module("agent.referee.evaluate")
    monkeypatch.setattr(evaluate, "_gate_file", lambda option, sandbox, device: str(gate))
    monkeypatch.setattr(evaluate, "_claim_memory", lambda *args, **kwargs: None)  # no GPU memory here
    with ThreadPoolExecutor(1) as pool, GpuGate(str(gate)) as other:  # the gate is let go first
        other.hold("exclusive")  # another evaluation times
        judged = pool.submit(judge_cpu, "relu_small", "relu_numpy", profile=False)
        source = tmp_path / "relu_numpy" / "relu_numpy.py"
        progress = _progress_reaching(source, WAIT_TO_RUN, timeout_s=120)
        assert "import torch" in progress  # the child started and imported torch meanwhile
        time.sleep(1.0)
        assert "reference state" not in _progress_reaching(source, WAIT_TO_RUN, timeout_s=1)
        other.release()
        result = judged.result(timeout=300)
    assert result.verdict == "correct", result.feedback()
    assert result.stage_times.candidate_stages[WAIT_TO_RUN] >= 1.0


def _progress_reaching(source: Path, stage: str, *, timeout_s: float) -> str:
    """The progress file of the candidate copied to `source` (judge_cpu), in the folder it is staged in."""
    content = (PYTHON_CANDIDATES / source.name).read_bytes()
    solution_root = SingleFileSolution.staging_root(source.resolve(), content)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for progress in solution_root.glob(".referee/*/progress.txt"):
            text = progress.read_text()
            if stage in text:
                return text
        time.sleep(0.05)
    raise AssertionError(f"no candidate progress reached {stage!r} in {timeout_s:.0f}s")

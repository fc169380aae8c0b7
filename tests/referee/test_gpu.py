"""On a GPU: real evaluations of our relu example, broken candidates, and KernelBench's
adversarial cases written as our own candidates. Run with `pytest -m gpu tests/referee`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from agent.referee import EvalOptions, EvalResult, evaluate
from agent.referee.baselines import BaselineCache
from agent.referee.policy import TOLERANCES
from tests.referee.conftest import TASKS, copy_candidate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
RELU_TASK = ROOT / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
RELU_EXAMPLE = ROOT / "skills" / "cuda-extension" / "examples" / "relu"


@pytest.fixture(scope="module")
def gpu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("referee-gpu")


@pytest.fixture(scope="module")
def baselines(gpu_dir: Path) -> BaselineCache:
    return BaselineCache(gpu_dir / "baselines.json")


@pytest.fixture(scope="module")
def relu_workspace(gpu_dir: Path) -> Path:
    target = gpu_dir / "relu"
    shutil.copytree(RELU_EXAMPLE, target)
    return target


def judge(task: Path, solution: Path, baselines: BaselineCache, **options: object) -> EvalResult:
    options.setdefault("run_timeout_s", 300.0)
    return evaluate(task, solution, EvalOptions(**options), baseline_cache=baselines)  # type: ignore[arg-type]


def candidate(name: str, gpu_dir: Path) -> Path:
    return copy_candidate(name, gpu_dir / name)


def assert_honest_relu_passes(relu_workspace: Path, baselines: BaselineCache) -> EvalResult:
    result = judge(RELU_TASK, relu_workspace, baselines, trials=2, profile=False)
    assert result.verdict == "correct", result.feedback()
    return result


# -- the honest example --------------------------------------------------------------------
@pytest.mark.quiet  # its other-streams bound is microseconds: host load beside it inflates the add-back
def test_relu_example_is_correct_timed_and_profiled(relu_workspace: Path, baselines: BaselineCache) -> None:
    result = judge(RELU_TASK, relu_workspace, baselines)
    assert result.verdict == "correct", result.feedback()
    assert result.correctness is not None and result.correctness.trials_run == 5
    assert len(result.correctness.rechecks) == 2 and all(r.passed for r in result.correctness.rechecks)
    perf = result.performance
    assert perf is not None and perf.eager is not None and perf.compile is not None, result.feedback()
    assert perf.compile_mode == "default"
    assert perf.candidate.method == "cuda_event_stream_end+sync_gap" and perf.candidate.l2_flush
    assert perf.candidate.reference_gap_ms and perf.candidate.sync_gap_ms, perf.candidate
    assert perf.candidate.other_streams_ms < 0.005, perf.candidate  # one stream: at most jitter added
    assert perf.candidate.n >= 10 and perf.candidate.cv < 0.5
    assert perf.speedup_vs_eager is not None and 0.3 < perf.speedup_vs_eager.value < 5.0
    assert any(k.origin == "own" and k.name.find("relu") >= 0 for k in perf.kernels), perf.kernels
    assert perf.own_kernel_share is not None and perf.own_kernel_share > 0.8
    assert perf.memory_floor_ms is not None and perf.bandwidth_gbps and perf.bandwidth_gbps > 500
    codes = {f.code for f in perf.flags}
    assert not codes & {
        "own_kernels_never_ran",
        "implausible_speedup",
        "below_memory_floor",
        "no_kernels_ran",
    }
    assert result.policy_report is not None and result.policy_report.forbidden == {}
    check = perf.timing_check
    # Consistent, never flagged. Whether it bounds anything depends on the host's load: ReLU's
    # loop costs more than its call, and under 4 test workers the cached eager loop cost 2.9 ms.
    assert check is not None and check.consistent, check
    assert perf.candidate.held_outputs and perf.candidate.persisting_l2_reset, perf.candidate
    assert {"trial 0", "timing", "profile"} <= set(result.stage_times.candidate_stages), result.stage_times
    again = judge(RELU_TASK, relu_workspace, baselines, trials=1)
    assert again.performance and again.performance.eager and again.performance.eager.cached


def test_single_file_load_inline_solution(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge(RELU_TASK, candidate("load_inline_relu", gpu_dir), baselines, trials=2)
    assert result.verdict == "correct", result.feedback()
    assert result.performance and any(k.origin == "own" for k in result.performance.kernels)


# -- broken candidates: each fails for its reason, and the harness goes on ---------------------
def test_segfault(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge(RELU_TASK, candidate("segfault", gpu_dir), baselines, policy="kernelbench", trials=1)
    assert result.verdict == "runtime_error" and result.failure and result.failure.kind == "signal"
    assert "SIGSEGV" in result.reason


def test_illegal_memory_access_then_the_next_evaluation_works(
    gpu_dir: Path, baselines: BaselineCache, relu_workspace: Path
) -> None:
    result = judge(RELU_TASK, candidate("illegal_address", gpu_dir), baselines, trials=1)
    assert result.verdict == "runtime_error", result.feedback()
    assert result.failure and result.failure.kind == "cuda_error"
    assert "illegal memory access" in result.reason or "illegal address" in result.reason
    assert_honest_relu_passes(relu_workspace, baselines)


def test_infinite_loop_kernel_times_out_then_the_next_evaluation_works(
    gpu_dir: Path, baselines: BaselineCache, relu_workspace: Path
) -> None:
    result = judge(RELU_TASK, candidate("infinite_loop", gpu_dir), baselines, trials=1, run_timeout_s=40.0)
    assert result.verdict == "timeout", result.feedback()
    assert result.failure and "trial 0" in result.failure.message
    assert_honest_relu_passes(relu_workspace, baselines)


def test_out_of_memory_then_the_next_evaluation_works(
    gpu_dir: Path, baselines: BaselineCache, relu_workspace: Path
) -> None:
    result = judge(RELU_TASK, candidate("oom", gpu_dir), baselines, trials=1)
    assert result.verdict == "runtime_error" and result.failure and result.failure.kind == "oom", (
        result.feedback()
    )
    assert_honest_relu_passes(relu_workspace, baselines)


def test_early_exit_and_forged_result_lines(gpu_dir: Path, baselines: BaselineCache) -> None:
    exited = judge(RELU_TASK, candidate("exit0", gpu_dir), baselines, policy="kernelbench", trials=1)
    assert exited.verdict == "runtime_error" and exited.failure and exited.failure.kind == "early_exit"
    forged = judge(RELU_TASK, candidate("forge_print", gpu_dir), baselines, policy="kernelbench", trials=1)
    assert forged.verdict == "policy_violation" and forged.failure and forged.failure.kind == "forged_record"
    record = judge(RELU_TASK, candidate("forge_record", gpu_dir), baselines, policy="kernelbench", trials=1)
    assert record.verdict == "policy_violation" and "failed authentication" in record.reason


# -- KernelBench's adversarial cases and friends -------------------------------------------------
def test_result_reuse_through_the_allocator_reads_poison(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge(RELU_TASK, candidate("empty_output", gpu_dir), baselines, trials=2)
    assert result.verdict == "incorrect", result.feedback()
    diff = result.correctness.trials[0].outputs[0]  # type: ignore[union-attr]
    assert diff.actual_nan == diff.numel, "every unwritten element must read as NaN"
    assert "never written" in result.feedback()


def test_zeroing_the_inputs_is_caught(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge(RELU_TASK, candidate("zero_inputs", gpu_dir), baselines, trials=2)
    assert result.verdict == "incorrect"
    assert any("changed input(s) 0 in place" in p for p in result.correctness.trials[0].problems)  # type: ignore[union-attr]


def test_work_left_running_on_another_stream_is_caught(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge(RELU_TASK, candidate("side_stream", gpu_dir), baselines, policy="kernelbench", trials=2)
    assert result.verdict == "incorrect", result.feedback()
    # Not necessarily trial 0: the first call's launches can wait out the side stream (H200, 2026-12-01).
    problems = [p for t in result.correctness.trials for p in t.problems]  # type: ignore[union-attr]
    assert any("changed after forward returned" in p for p in problems), problems


def test_zeros_for_tiny_outputs_fail(gpu_dir: Path, baselines: BaselineCache) -> None:
    # KernelBench's elementwise limits pass zeros here; the norm-wise limit is what fails them. (The
    # fp32 policy's atol of 1e-3 sometimes catches the largest of 262144 softmax values, ~1.1e-3
    # on the H100 2026-12-07, and would hide which check did.)
    result = judge(
        TASKS / "softmax_tiny.py",
        candidate("zeros", gpu_dir),
        baselines,
        tolerance=TOLERANCES["default"],
        trials=2,
    )
    assert result.verdict == "incorrect"
    assert result.correctness.trials[0].outputs[0].mismatch_count == 0  # type: ignore[union-attr]
    assert "norm-wise relative error" in result.reason


def test_replaying_results_in_timed_calls_is_caught(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge(
        RELU_TASK, candidate("cache_after_trials", gpu_dir), baselines, policy="kernelbench", trials=5
    )
    assert result.verdict == "incorrect", result.feedback()
    assert all(t.passed for t in result.correctness.trials)  # type: ignore[union-attr]
    assert result.correctness.rechecks and not any(r.passed for r in result.correctness.rechecks)  # type: ignore[union-attr]


def test_aten_called_from_the_extensions_cpp_violates_strict(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge(RELU_TASK, candidate("aten_from_cpp", gpu_dir), baselines, trials=2)
    assert result.verdict == "policy_violation", result.feedback()
    assert result.policy_report and "aten.relu.default" in result.policy_report.forbidden
    assert result.performance and "own_kernels_never_ran" in {f.code for f in result.performance.flags}


def test_torch_glue_violates_strict(gpu_dir: Path, baselines: BaselineCache) -> None:
    result = judge(RELU_TASK, candidate("relu_torch", gpu_dir), baselines, trials=2, profile=False)
    assert result.verdict == "policy_violation"


# -- the measuring parts on their own -----------------------------------------------------------
def test_poisoned_allocator_hands_out_nan() -> None:

    import sandbox.workers.siblings  # noqa: F401  (the workers import each other by name)
    from sandbox.workers.referee.candidate_trials import poison_allocator

    # A free remnant of a segment still partly in use: empty_cache cannot release it, best fit
    # prefers it, and it holds what was written before (the H200 showed such stale values).
    stale = torch.ones(128 << 20, device="cuda")
    del stale
    kept = torch.empty(48 << 20, device="cuda")  # the front 192 MB; the back 320 MB stay cached
    poisoned, needed = poison_allocator("cuda", 0)
    assert poisoned >= needed
    remnant = torch.empty(80 << 20, device="cuda")
    large = torch.empty(1 << 22, device="cuda")
    small = torch.empty(1000, device="cuda")
    half = torch.empty(1 << 20, dtype=torch.float16, device="cuda")
    for tensor in (remnant, large, small, half):
        assert torch.isnan(tensor).all(), float(torch.isnan(tensor).float().mean())
    del kept


@pytest.mark.quiet
def test_work_on_a_side_stream_is_inside_the_timing() -> None:
    from sandbox.workers.gpu.timing import TimingConfig, time_calls

    side = torch.cuda.Stream()
    config = TimingConfig(min_reps=20, max_reps=40)

    def same_stream(_inputs: object) -> None:
        torch.cuda._sleep(2_000_000)

    def other_stream(_inputs: object) -> None:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(2_000_000)

    honest = time_calls(same_stream, lambda i: None, device="cuda", config=config)
    hidden = time_calls(other_stream, lambda i: None, device="cuda", config=config)
    # A long honest call gets next to nothing added; the side stream's sleep is added back.
    assert honest["other_streams_ms"] < 0.01 * honest["median_ms"], honest
    assert hidden["other_streams_ms"] > 0.9 * honest["median_ms"], hidden
    assert 0.95 * honest["median_ms"] < hidden["median_ms"] < 1.1 * honest["median_ms"], (honest, hidden)


BLOCKING_SYNC_PROBE = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from timing import TimingConfig, _cudart, time_calls
import ctypes
config = TimingConfig(min_reps=20, max_reps=40, blocking_sync=True)
side = torch.cuda.Stream()
def same_stream(_inputs):
    torch.cuda._sleep(2_000_000)
def other_stream(_inputs):
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000)
honest = time_calls(same_stream, lambda i: None, device="cuda", config=config)
hidden = time_calls(other_stream, lambda i: None, device="cuda", config=config)
flags = ctypes.c_uint(0)
_cudart().cudaGetDeviceFlags(ctypes.byref(flags))
torch.relu(torch.ones(4, device="cuda")).sum().item()  # no stale runtime error trips torch
print(json.dumps({"honest": honest, "hidden": hidden, "flags": flags.value}))
"""


@pytest.mark.quiet
def test_blocking_sync_switches_on_and_still_counts_side_streams() -> None:
    """TimingConfig(blocking_sync=True): the process waits for the GPU asleep, and the timing
    still adds a side stream's work back (in a process of its own: the flags are the process's)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", BLOCKING_SYNC_PROBE, str(ROOT / "sandbox" / "workers")],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    honest, hidden = found["honest"], found["hidden"]
    assert found["flags"] & 0x04, found["flags"]  # cudaDeviceScheduleBlockingSync
    assert honest["other_streams_ms"] < 0.01 * honest["median_ms"], honest
    assert hidden["other_streams_ms"] > 0.9 * honest["median_ms"], hidden


def test_cli_prints_json_and_exits_zero(relu_workspace: Path) -> None:
    from typer.testing import CliRunner

    from agent.cli.eval import eval_app

    outcome = CliRunner().invoke(
        eval_app, [str(RELU_TASK), str(relu_workspace), "--trials", "1", "--no-profile", "--json"]
    )
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["verdict"] == "correct"

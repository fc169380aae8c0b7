"""Result models, speedups with noise, performance flags, kernel attribution, feedback text."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from agent.build.compile import CompileResult
from agent.referee import assemble
from agent.referee.kernels import kernel_base_name, kernel_breakdown, kernel_origin, own_kernel_names
from agent.referee.policy import TOLERANCES
from agent.referee.report import verdict_table
from agent.referee.results import (
    EvalResult,
    FailureReport,
    OutputDiff,
    PerformanceReport,
    SolutionRef,
    TaskRef,
    TimingStats,
    TrialReport,
)


def stats(median: float, iqr: float = 0.0, method: str = "cuda_event_stream_end+sync_gap") -> TimingStats:
    return TimingStats(
        median_ms=median,
        q1_ms=median - iqr / 2,
        q3_ms=median + iqr / 2,
        iqr_ms=iqr,
        mean_ms=median,
        std_ms=iqr,
        cv=iqr / median,
        min_ms=median - iqr,
        max_ms=median + iqr,
        n=100,
        warmup=5,
        method=method,
        l2_flush=True,
        host_median_ms=median,
    )


def result(**fields: object) -> EvalResult:
    base = {
        "task": TaskRef(name="19_ReLU", key="level1/19_ReLU@abc", sha256="abc", path="/t/19_ReLU.py"),
        "solution": SolutionRef(kind="workspace", content_hash="def", path="/w/model_new.py"),
        "policy": "strict",
        "verdict": "correct",
        "reason": "correct on 5/5 trials",
        "compile": CompileResult(
            ok=True,
            status="built",
            solution_kind="workspace",
            content_hash="def",
            arch="9.0",
            arch_source="test",
            build_dir="/b",
            duration_s=1.0,
        ),
    }
    return EvalResult(**(base | fields))  # type: ignore[arg-type]


def test_speedup_inside_the_noise_is_reported_as_such() -> None:
    noisy = assemble.speedup("eager", stats(1.0, iqr=0.2), stats(0.95, iqr=0.2))
    assert noisy.within_noise and noisy.outcome == "within_noise" and noisy.low < 1 < noisy.high
    faster = assemble.speedup("eager", stats(2.0, iqr=0.01), stats(1.0, iqr=0.01))
    assert faster.value == pytest.approx(2.0) and faster.outcome == "faster" and not faster.within_noise
    slower = assemble.speedup("compile", stats(1.0), stats(1.5))
    assert slower.outcome == "slower"
    tight = assemble.speedup("eager", stats(1.01), stats(1.0))
    assert tight.noise == assemble.NOISE_FLOOR and tight.within_noise  # no spread: the floor still applies


def perf(
    candidate_ms: float,
    *,
    kernels: list[list] | None = None,
    floor_bytes: int | None = None,
    policy: str = "strict",
) -> PerformanceReport:
    cand = {
        "timing": stats(candidate_ms).model_dump(),
        "kernels": kernels,
        "profiled_calls": 2,
        "profile_error": None,
    }
    report = assemble.performance_report(
        cand,
        eager=stats(1.0),
        compiled=None,
        compile_mode="default",
        baseline_errors={},
        own_kernels={"relu_kernel"},
        bytes_moved=floor_bytes,
        bandwidth_gbps=4000.0 if floor_bytes else None,
        bandwidth_source="measured" if floor_bytes else None,
        policy=policy,
    )
    assert report is not None
    return report


def codes(report: PerformanceReport) -> set[str]:
    return {flag.code for flag in report.flags}


def test_implausible_speedup_and_the_memory_floor_are_flagged() -> None:
    own = [["relu_kernel(float const*, float*, long)", 2, 10.0]]
    assert "implausible_speedup" in codes(perf(0.05, kernels=own))
    assert "implausible_speedup" not in codes(perf(0.5, kernels=own))
    # 512 MB at 4000 GB/s cannot move in less than 0.128 ms
    report = perf(0.05, kernels=own, floor_bytes=512 * 10**6)
    assert report.memory_floor_ms == pytest.approx(0.128)
    assert "below_memory_floor" in codes(report)
    assert "below_memory_floor" not in codes(perf(0.2, kernels=own, floor_bytes=512 * 10**6))


def test_kernel_attribution_and_own_kernels_that_never_ran() -> None:
    mixed = [
        ["void relu_kernel<float>(float const*, float*, long)", 4, 300.0],
        ["sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_cublas", 2, 100.0],
    ]
    report = perf(0.5, kernels=mixed)
    assert [k.origin for k in report.kernels] == ["own", "vendor"]
    assert report.kernels[0].calls == 2 and report.kernels[0].time_us == 150.0
    assert report.own_kernel_share == pytest.approx(0.75)
    assert "own_kernels_never_ran" not in codes(report)
    foreign = perf(0.5, kernels=[["void at::native::vectorized_elementwise_kernel<4>(int)", 2, 10.0]])
    assert {"own_kernels_never_ran", "torch_kernels"} <= codes(foreign)
    assert "torch_kernels" not in codes(perf(0.5, kernels=foreign_rows(), policy="kernelbench"))
    assert "no_kernels_ran" in codes(perf(0.5, kernels=[]))


def foreign_rows() -> list[list]:
    return [["void at::native::vectorized_elementwise_kernel<4>(int)", 2, 10.0]]


def test_kernel_names_from_sources_and_profiles() -> None:
    source = "template <int B>\n__global__ void __launch_bounds__(256, 2) tiled(float* x) {}\n__global__ static void tail(int)"
    assert own_kernel_names([source]) == {"tiled", "tail"}
    assert kernel_base_name("void ns::tiled<128>(float*)") == "tiled"
    assert kernel_base_name("_ZN2ns5tiledEPf") == "tiled" and kernel_base_name("_Z4tailPi") == "tail"
    # As the H200's profiler names the template library's kernels (seen 2026-12-02: all flagged
    # own_kernels_never_ran before this).
    profiled = "(anonymous namespace)::norm_apply(tk::Ptrs, tk::Stats const*, float*)"
    assert kernel_base_name(profiled) == "norm_apply"
    assert kernel_origin(profiled, {"norm_apply", "norm_partial"}) == "own"
    assert (
        kernel_base_name("void (anonymous namespace)::ewise_kernel<4>(tk::Ptrs, Outs, long)")
        == "ewise_kernel"
    )
    assert kernel_origin("Memcpy DtoD (Device -> Device)", set()) == "memory"
    assert kernel_origin("triton_poi_fused_relu_0", set()) == "triton"
    rows, share = kernel_breakdown([], 1, set())
    assert rows == [] and share is None


def test_result_round_trips_through_json() -> None:
    original = result(performance=perf(0.5, kernels=[["relu_kernel(float*)", 2, 5.0]]))
    again = EvalResult.model_validate_json(original.model_dump_json())
    assert again == original and again.passed


def test_feedback_for_an_incorrect_result_points_at_the_element() -> None:
    diff = OutputDiff(
        output="output 0",
        passed=False,
        problems=["3 of 100 elements (3%) outside atol=0.01 rtol=0.01"],
        numel=100,
        mismatch_count=3,
        worst_index=[2, 7],
        worst_expected=1.5,
        worst_actual=-1.5,
        max_abs_err=3.0,
        max_rel_err=2.0,
        norm_rel_err=0.4,
        atol=0.01,
        rtol=0.01,
        norm_rtol=0.01,
    )
    from agent.referee.results import CorrectnessReport

    correctness = CorrectnessReport(
        passed=False,
        trials_requested=5,
        trials_run=5,
        tolerance=TOLERANCES["default"],
        trials=[TrialReport(index=0, passed=False, outputs=[diff])],
    )
    text = result(
        verdict="incorrect", reason=assemble.first_problem(correctness), correctness=correctness
    ).feedback()
    assert text.startswith("VERDICT: incorrect - trial 0: output 0: 3 of 100 elements")
    assert "worst at [2, 7]: expected 1.5, got -1.5" in text


def test_feedback_for_a_crash_shows_the_detail_and_a_correct_one_the_times() -> None:
    crashed = result(
        verdict="runtime_error",
        reason="trial 2: RuntimeError: CUDA error: an illegal memory access was encountered",
        failure=FailureReport(
            stage="trial 2", kind="cuda_error", message="m", detail="File kernels/x.cu\nboom"
        ),
    )
    assert crashed.feedback().splitlines()[1:] == ["File kernels/x.cu", "boom"]
    good = result(performance=perf(0.5, kernels=[["relu_kernel(float*)", 2, 5.0]]))
    text = good.feedback()
    assert "2.00x vs eager" in text and "relu_kernel" in text and "own kernels 100.0%" in text


def test_the_verdict_table_renders() -> None:
    buffer = io.StringIO()
    Console(file=buffer, width=160).print(
        verdict_table(result(performance=perf(0.5, kernels=[["relu_kernel(float*)", 2, 5.0]])))
    )
    text = buffer.getvalue()
    assert "correct" in text and "time (yours)" in text and "relu_kernel" in text


def test_only_a_candidates_own_out_of_memory_is_judged_again_with_the_whole_gpu() -> None:
    """judge_compiled judges a candidate again with the GPU's memory to itself when it ran out
    while others shared the GPU; that is for the candidate's out-of-memory failure alone, not for
    a wrong answer or a crash of another kind."""
    from agent.referee.evaluate import out_of_memory
    from agent.referee.results import FailureReport

    def failed(kind: str, verdict: str = "runtime_error") -> EvalResult:
        report = FailureReport(
            stage="trial 0", kind=kind, message="trial 0: OutOfMemoryError: CUDA out of memory"
        )
        return result(verdict=verdict, reason=report.message, failure=report)

    assert out_of_memory(failed("oom"))
    assert not out_of_memory(failed("exception"))
    assert not out_of_memory(failed("oom", verdict="referee_error"))
    assert not out_of_memory(result())


def test_the_referees_own_want_of_room_beside_others_is_judged_again_with_the_whole_gpu() -> None:
    """A full-size task whose outputs the judge had no room to take beside other evaluations
    (level-1 RMSNorm in a batch on the H200) is not an answer: judged again alone."""
    from agent.referee.evaluate import referee_short_of_memory
    from agent.referee.results import FailureReport

    def failed(kind: str, verdict: str = "referee_error") -> EvalResult:
        report = FailureReport(stage="judge", kind=kind, message="the judge has no room on the GPU")
        return result(verdict=verdict, reason=report.message, failure=report)

    assert referee_short_of_memory(failed("referee_capacity"))
    assert referee_short_of_memory(failed("oom"))  # the judge's own OOM: level-1 SDPA beside a 116 GB judge
    assert not referee_short_of_memory(failed("judge_failed"))
    assert not referee_short_of_memory(failed("referee_capacity", verdict="runtime_error"))
    assert not referee_short_of_memory(result())


def test_a_timing_in_doubt_beside_others_is_judged_again_alone_and_says_why() -> None:
    """Two legitimate generations of a full-size batch on the H200 got `policy_violation` from the
    timing check while others shared the machine: such a result is judged again with the GPU to
    itself, and the second judging is the answer. A clean result, or a wrong one, is final."""
    from agent.referee.evaluate import why_judge_again
    from agent.referee.results import FailureReport, Flag

    doubted = perf(0.5)
    doubted.flags.append(Flag(code="timing_inconsistent", message="its supervisor's clock allows no less"))
    why = why_judge_again(result(verdict="policy_violation", reason="impossible", performance=doubted))
    assert why is not None and "timing" in why and "supervisor's clock" in why
    streams = perf(0.5)
    streams.flags.append(Flag(code="other_streams_time", message="work on other streams"))
    streams.candidate.other_streams_ms = 0.005  # 1% of the call: within the noise floor, final
    assert why_judge_again(result(performance=streams)) is None
    streams.candidate.other_streams_ms = 0.1  # level-1 Average_Pooling_3D got 14% so: again
    why = why_judge_again(result(performance=streams))
    assert why is not None and "other streams" in why
    judge_oom = FailureReport(
        stage="judge", kind="oom", message="the referee's judge failed: OutOfMemoryError"
    )
    why = why_judge_again(result(verdict="referee_error", reason=judge_oom.message, failure=judge_oom))
    assert why is not None and "memory" in why
    no_eager = perf(0.5)
    no_eager.baseline_errors = {"eager": "OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB"}
    why = why_judge_again(result(performance=no_eager))
    assert why is not None and "baseline" in why and "eager" in why
    no_eager.baseline_errors = {"eager": "RuntimeError: the reference raised"}  # not the GPU's doing
    assert why_judge_again(result(performance=no_eager)) is None
    assert why_judge_again(result(performance=perf(0.5))) is None
    assert why_judge_again(result(verdict="incorrect", reason="trial 0 differs")) is None


def test_judge_compiled_judges_a_doubted_timing_again_alone_and_keeps_the_second(monkeypatch) -> None:
    """The wiring: the first judging shared the GPU and its timing was doubted, so the second is
    asked for with the GPU to itself, and its verdict, with the why appended, is the answer. A
    doubted timing judged alone to begin with is final."""
    import importlib

    from agent.referee.results import Flag

    evaluate_module = importlib.import_module(
        "agent.referee.evaluate"
    )  # the package's `evaluate` is the function

    doubted = perf(0.5)
    doubted.flags.append(Flag(code="timing_inconsistent", message="its supervisor's clock allows no less"))
    answers = [
        (result(verdict="policy_violation", reason="impossible", performance=doubted), True),
        (result(performance=perf(0.5)), False),
    ]
    calls: list[bool] = []

    def fake(*_args: object, whole_gpu: bool, **_kwargs: object) -> tuple[EvalResult, bool]:
        calls.append(whole_gpu)
        return answers[len(calls) - 1]

    monkeypatch.setattr(evaluate_module, "_judge_compiled", fake)
    final = evaluate_module.judge_compiled(None, None, None, sandbox=None)  # type: ignore[arg-type]
    assert calls == [False, True]
    assert final.verdict == "correct" and "judged again with the GPU to itself" in final.reason
    assert "supervisor's clock" in final.reason

    calls.clear()
    answers[0] = (answers[0][0], False)  # alone already: no second judging
    final = evaluate_module.judge_compiled(None, None, None, sandbox=None)  # type: ignore[arg-type]
    assert calls == [False] and final.verdict == "policy_violation"

"""The host's checks of a candidate's timing against its supervisor's observations (pure functions)."""

from __future__ import annotations

from typing import Any

from agent.referee import assemble
from agent.referee.results import PerformanceReport, TimingStats
from sandbox.workers.protocol import derive_seed


def stats(
    mean_ms: float,
    *,
    n: int = 100,
    window_ms: float | None = None,
    method: str = "cuda_event_stream_end+sync_gap",
) -> dict:
    return {
        "median_ms": mean_ms,
        "q1_ms": mean_ms * 0.99,
        "q3_ms": mean_ms * 1.01,
        "iqr_ms": mean_ms * 0.02,
        "mean_ms": mean_ms,
        "std_ms": mean_ms * 0.01,
        "cv": 0.01,
        "min_ms": mean_ms * 0.98,
        "max_ms": mean_ms * 1.05,
        "n": n,
        "warmup": 3,
        "method": method,
        "l2_flush": True,
        "host_median_ms": mean_ms,
        "window_ms": window_ms,
    }


def candidate(
    reported_ms: float, window_ms: float, *, n: int = 100, seen_reps: int = 100, **timing: Any
) -> dict:
    return {
        "timing": stats(reported_ms, n=n, **timing),
        "supervisor": {
            "window": {"window_ms": window_ms, "reps_run": seen_reps, "seed": 7, "picks": [3, 42]}
        },
    }


# The eager arm in the judge: 1.0 ms per call, 0.25 ms of loop cost per repetition.
EAGER = TimingStats.model_validate(stats(1.0, window_ms=125.0))


def performance(cand: dict) -> PerformanceReport | None:
    return assemble.performance_report(
        cand,
        eager=EAGER,
        compiled=None,
        compile_mode=None,
        baseline_errors={},
        own_kernels=set(),
        bytes_moved=None,
        bandwidth_gbps=None,
        bandwidth_source=None,
        policy="kernelbench",
    )


def test_an_honest_record_is_consistent() -> None:
    cand = candidate(0.5, window_ms=100 * (0.5 + 0.25))
    check = assemble.timing_check(cand, EAGER, None)
    assert check is not None and check.consistent and check.ratio and check.ratio >= 1.0
    assert abs(check.overhead_ms - 0.25) < 1e-9  # type: ignore[operator]
    report = performance(cand)
    assert report is not None and abs(report.speedup_vs_eager.value - 2.0) < 1e-9  # type: ignore[union-attr]
    assert "timing_inconsistent" not in {f.code for f in report.flags}
    assert assemble.timing_tampered(check) is None


def test_times_shrunk_after_the_fact_are_caught_and_the_speedup_comes_from_the_clock() -> None:
    cand = candidate(0.5 / 2, window_ms=100 * (0.5 + 0.25))  # claims 2x faster than it ran
    check = assemble.timing_check(cand, EAGER, None)
    assert check is not None and not check.consistent and assemble.timing_tampered(check) is None
    report = performance(cand)
    assert report is not None and "timing_inconsistent" in {f.code for f in report.flags}
    assert report.speedup_vs_eager is not None and report.speedup_vs_eager.value < 2.5  # true 2x, claimed 4x


def test_a_tenfold_lie_is_a_violation() -> None:
    check = assemble.timing_check(candidate(0.05, window_ms=100 * (0.5 + 0.25)), EAGER, None)
    assert check is not None and "impossible" in (assemble.timing_tampered(check) or "")


def test_record_and_window_must_agree() -> None:
    fewer = assemble.timing_check(candidate(0.5, window_ms=75.0, n=400, seen_reps=100), EAGER, None)
    assert fewer is not None and not fewer.consistent and "400" in fewer.note
    longer = assemble.timing_check(candidate(2.0, window_ms=75.0), EAGER, None)  # 200 ms in a 75 ms window
    assert longer is not None and not longer.consistent and "more than the timing window" in longer.note
    assert assemble.timing_tampered(longer) is not None


def test_no_check_on_the_cpu_or_without_a_window() -> None:
    assert assemble.timing_check(candidate(0.01, 75.0, method="host_clock"), EAGER, None) is None
    assert assemble.timing_check({"timing": stats(0.5)}, EAGER, None) is None
    unknown = assemble.timing_check(candidate(0.5, 75.0), TimingStats.model_validate(stats(1.0)), None)
    assert unknown is not None and unknown.consistent and "no baseline window" in unknown.note


def test_rechecks_are_the_supervisors_picks_with_its_seeds() -> None:
    cand = candidate(0.5, 75.0)
    cand["rechecks"] = [
        {"index": 3, "seed": 123, "file": "recheck_0.pt", "leaves": []},  # a claimed seed is ignored
        {"index": 9, "seed": 9, "file": "recheck_1.pt", "leaves": []},  # not picked: dropped
    ]
    planned, problems = assemble.supervised_rechecks(cand)
    assert problems == []
    assert [(r["index"], r["seed"], r["file"]) for r in planned] == [
        (3, derive_seed(7, 3), "recheck_0.pt"),
        (42, derive_seed(7, 42), ""),  # picked but not kept: the judge fails it as unreadable
    ]


def test_timings_reported_without_a_window_are_a_problem() -> None:
    planned, problems = assemble.supervised_rechecks({"timing": stats(0.5), "supervisor": {"window": None}})
    assert planned == [] and "without opening the supervised timing window" in problems[0]


def test_calls_far_shorter_than_the_loop_get_no_bound_and_say_so() -> None:
    check = assemble.timing_check(candidate(0.001, window_ms=100 * 0.26), EAGER, None)
    assert check is not None and check.consistent and check.ratio is None and "no bound" in check.note


def test_time_added_for_other_streams_is_flagged() -> None:
    cand = candidate(0.5, window_ms=100 * (0.5 + 0.25))
    cand["timing"]["other_streams_ms"] = 0.04
    report = performance(cand)
    assert report is not None
    flag = next(f for f in report.flags if f.code == "other_streams_time")
    assert "40.0 us per call" in flag.message
    assert "other_streams_time" not in {f.code for f in performance(candidate(0.5, 75.0)).flags}  # type: ignore[union-attr]


def test_time_added_for_other_streams_does_not_count_against_the_window() -> None:
    """Calls of 3.4 ms with 3.8 ms added to each for other streams (the gaps after a sync the host
    was slow to return from): 31 of them fit in a 202 ms window though 31 x 7.2 ms do not."""
    eager = TimingStats.model_validate(stats(3.1, n=32, window_ms=120.3))
    cand = candidate(7.2, window_ms=202.5, n=31, seen_reps=31)
    cand["timing"]["other_streams_ms"] = 3.8
    check = assemble.timing_check(cand, eager, None)
    assert check is not None and check.consistent, check
    assert assemble.timing_tampered(check) is None
    cand["timing"]["other_streams_ms"] = 0.0  # the same times with nothing added are impossible
    check = assemble.timing_check(cand, eager, None)
    assert check is not None and "more than the timing window" in check.note

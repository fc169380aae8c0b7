"""From the workers' records to reports: correctness, policy, performance. The host decides
here; a worker's record only carries observations."""

from __future__ import annotations

import math
from typing import Literal, cast

from agent.referee.diff import output_diff, render_diff
from agent.referee.kernels import kernel_breakdown
from agent.referee.policy import TolerancePolicy, forbidden
from agent.referee.results import (
    CorrectnessReport,
    Flag,
    OutputDiff,
    PerformanceReport,
    PolicyReport,
    Speedup,
    TimingCheck,
    TimingStats,
    TrialReport,
)
from sandbox.workers.protocol import (
    CandidateRecord,
    JudgedRecheck,
    JudgedTrial,
    JudgeResult,
    RecheckRecord,
    SupervisedRecheck,
    TrialRecord,
    derive_seed,
)
from sandbox.workers.referee.op_policy import unseen_by

NOISE_FLOOR = 0.02  # run-to-run variation between processes that no in-run spread shows
IMPLAUSIBLE_SPEEDUP = 10.0
FLOOR_SLACK = 0.8
# The timing check (TimingCheck): the candidate's loop may spend a little less outside the timed
# call than the judge's did, and two processes' host loops jitter; below CONSISTENT the speedups are
# taken from the supervisor's clock, below TAMPERED the reported timing is a violation. Honest
# solutions measured on the H200 (2026-12-01) gave 0.85 to 1.35 when timed one at a time.
OVERHEAD_SLACK = 0.25
TIMING_SLACK_MS = 0.02
CONSISTENT_RATIO = 0.7
TAMPERED_RATIO = 0.4


def _outputs(candidate: TrialRecord | RecheckRecord, judged: JudgedTrial | JudgedRecheck) -> list[OutputDiff]:
    expected = judged.get("leaves", [])
    actual = candidate.get("leaves", [])
    records = judged.get("diffs", [])
    diffs = []
    for index, record in enumerate(records):
        diff = output_diff(f"output {index}", record)
        if len(expected) == len(actual) == len(records):
            want, got = expected[index], actual[index]
            diff.type_actual = got.get("type")
            want_device, got_device = want.get("device"), got.get("device")
            diff.device_expected, diff.device_actual = want_device, got_device
            if want.get("exact_tensor") and not got.get("exact_tensor"):
                diff.problems = [
                    f"a {got.get('type')} where a plain torch.Tensor is expected (no subclasses)"
                ]
                diff.passed = False
            elif want_device and got_device and want_device != got_device:
                diff.problems.append(f"on device {got_device} where {want_device} is expected")
                diff.passed = False
        diffs.append(diff)
    return diffs


def trial_report(
    candidate: TrialRecord | RecheckRecord,
    judged: JudgedTrial | JudgedRecheck,
    *,
    kind: Literal["trial", "timed_call"] = "trial",
) -> TrialReport:
    problems: list[str] = []
    mutated: list[int] = candidate.get("mutated_inputs") or []
    if mutated and not judged.get("reference_mutates_inputs"):
        which = ", ".join(str(i) for i in mutated)
        problems.append(
            f"the forward changed input(s) {which} in place; the reference leaves its inputs alone"
        )
    aliases: list[tuple[int, int]] = candidate.get("aliases") or []
    if aliases and not judged.get("reference_aliases_inputs"):
        pairs = ", ".join(f"output {o} shares memory with input {i}" for o, i in aliases)
        problems.append(f"{pairs}; return new tensors")
    for leaf in candidate.get("changed_after_return", []):
        problems.append(
            f"output {leaf} changed after forward returned: work was still running on another stream; "
            "launch on the current stream (c10::cuda::getCurrentCUDAStream) or make it wait for yours"
        )
    outputs = _outputs(candidate, judged)
    passed = not problems and bool(outputs) and all(d.passed for d in outputs)
    return TrialReport(
        index=candidate.get("index", 0), kind=kind, passed=passed, problems=problems, outputs=outputs
    )


def correctness_report(
    cand: CandidateRecord, judge: JudgeResult, tolerance: TolerancePolicy, trials_requested: int
) -> CorrectnessReport:
    judged_trials = {t["index"]: t for t in judge.get("trials", [])}
    trials = [
        trial_report(t, judged_trials[t["index"]]).model_copy(
            update={"inputs": judged_trials[t["index"]].get("inputs", "task")}
        )
        for t in cand.get("trials", [])
        if t["index"] in judged_trials
    ]
    judged_rechecks = {r["index"]: r for r in judge.get("rechecks", [])}
    rechecks = []
    for recheck in cand.get("rechecks", []):
        judged = judged_rechecks.get(recheck["index"])
        if judged is not None:
            report = trial_report(recheck, judged, kind="timed_call")
            if not report.passed:
                report.problems.append(
                    "a timed call's output does not match the reference for that call's inputs: "
                    "results must not be cached or reused across calls"
                )
            rechecks.append(report)
    passed = len(trials) == trials_requested and all(t.passed for t in [*trials, *rechecks])
    return CorrectnessReport(
        passed=passed,
        trials_requested=trials_requested,
        trials_run=len(trials),
        tolerance=tolerance,
        trials=trials,
        rechecks=rechecks,
        hidden_transforms=list(judge.get("hidden_transforms") or ["task"]),
    )


def tampered_inputs(cand: CandidateRecord, judge: JudgeResult) -> list[int]:
    """Trials whose inputs, as generated in the candidate process, differ from the judge's."""
    judged = {t["index"]: t.get("input_checksums") for t in judge.get("trials", [])}
    return [t["index"] for t in cand.get("trials", []) if judged.get(t["index"]) != t.get("input_checksums")]


def policy_report(
    policy: str, cand: CandidateRecord, *, forged_notes: list[str] | None = None
) -> PolicyReport:
    ops = dict(cand.get("ops") or {})
    nested: dict[str, int] = dict(cand.get("profiler_ops") or {})
    for name, count in (cand.get("profile_ops") or {}).items():
        nested[name] = nested.get(name, 0) + count
    bad = forbidden(policy, {**ops, **unseen_by(ops, nested)})
    report = PolicyReport(policy=policy, ops=ops, nested_ops=nested, forbidden=bad)
    if bad:
        listed = ", ".join(f"{name} x{count}" for name, count in list(bad.items())[:8])
        report.violations.append(
            f"the {policy} policy forbids torch compute in the forward and the extension; called: {listed}. "
            "Write these as your own CUDA kernels (allocation and views are fine)"
        )
    captured = dict(cand.get("setup_captured_ops") or {})
    for name, count in (cand.get("captured_ops") or {}).items():
        captured[name] = captured.get(name, 0) + count
    replayed = forbidden(policy, captured)
    if replayed:
        listed = ", ".join(f"{name} x{count}" for name, count in list(replayed.items())[:8])
        at_setup = forbidden(policy, dict(cand.get("setup_captured_ops") or {}))  # the forward's are counted
        report.forbidden.update({name: report.forbidden.get(name, 0) + n for name, n in at_setup.items()})
        report.violations.append(
            f"torch operators were captured into a CUDA graph that the forward replays ({listed}): the "
            f"{policy} policy forbids torch compute, replayed or not. Capture only your own kernels"
        )
    launches = cand.get("graph_launches") or 0
    if launches:
        report.notes.append(f"the forward launches {launches:g} CUDA graph(s) a call")
    changed = cand.get("flags_changed") or {}
    if changed:
        listed = ", ".join(f"{name} {before} -> {after}" for name, (before, after) in changed.items())
        report.violations.append(f"the candidate changed global torch settings: {listed}; leave them alone")
    threads = cand.get("threads") or {}
    if threads.get("python_new"):
        text = f"the candidate started Python threads ({', '.join(threads['python_new'][:5])})"
        (report.violations if policy == "strict" else report.notes).append(text)
    if policy != "strict" and ops:
        report.notes.append(f"{sum(ops.values())} torch operator calls in the forward (allowed by {policy})")
    moved = cand.get("identity_changed") or []
    if moved:
        listed = ", ".join(moved[:8]) + (f" and {len(moved) - 8} more" if len(moved) > 8 else "")
        report.violations.append(
            f"the candidate rebound functions the referee's worker relies on ({listed}); "
            "do not patch torch, the clocks or the task module"
        )
    for note in forged_notes or []:
        report.violations.append(note)
    window = (cand.get("supervisor") or {}).get("window") or {}
    if window.get("picks_known_in_advance"):
        report.notes.append(
            "the timed calls' outputs were too large to hold, so the calls to recheck were named "
            "before the timed loop ran"
        )
    return report


def poison_shortfall(cand: CandidateRecord) -> str | None:
    """Why the trials cannot vouch for every output element, when the GPU was too full to poison
    the allocator with NaN: an unwritten element could then hold another process's data."""
    short = [
        t
        for t in cand.get("trials", [])
        if (t.get("poisoned_bytes") or 0) < (t.get("poison_needed_bytes") or 0)
    ]
    if not short:
        return None
    t = short[0]
    return (
        f"the GPU had too little free memory to poison the allocator before trial {t.get('index')} "
        f"({(t.get('poisoned_bytes') or 0) / 2**20:.0f} of {t['poison_needed_bytes'] / 2**20:.0f} MiB), so "
        "unwritten outputs could not be told apart: evaluate again on a less busy GPU"
    )


def supervised_rechecks(cand: CandidateRecord) -> tuple[list[SupervisedRecheck], list[str]]:
    """The timed calls to recheck, as the supervisor chose them, with the seeds it handed out
    (never the candidate process's claims), and what the record gets wrong about them."""
    problems: list[str] = []
    window = (cand.get("supervisor") or {}).get("window")
    if window is None:
        if cand.get("timing"):
            problems.append("the candidate reported timings without opening the supervised timing window")
        return [], problems
    claimed = {r.get("index"): r for r in cand.get("rechecks") or [] if isinstance(r, dict)}
    planned = []
    for index in window.get("picks") or []:
        # The child's claim may lack any key (or carry others): the host fills in what it needs.
        entry = cast(
            "SupervisedRecheck", dict(claimed.get(index) or {"index": index, "file": "", "leaves": []})
        )
        entry.update(index=index, seed=derive_seed(int(window["seed"]), index))
        entry.setdefault("file", "")
        planned.append(entry)
    return planned, problems


def timing_check(
    cand: CandidateRecord, eager: TimingStats | None, compiled: TimingStats | None
) -> TimingCheck | None:
    """The candidate's reported times against the supervisor's clock on the same window."""
    window = (cand.get("supervisor") or {}).get("window") or {}
    timing = cand.get("timing") or {}
    window_ms = window.get("window_ms")
    if not timing or window_ms is None:
        return None
    if not str(timing.get("method", "")).startswith("cuda"):
        return None  # on the CPU (tests of the machinery) the loop's own cost swamps the calls
    reps = int(window.get("reps_run") or 0)
    check = TimingCheck(
        window_ms=float(window_ms), reps=reps, reported_mean_ms=float(timing.get("mean_ms", 0.0))
    )
    if reps <= 0 or timing.get("n") != reps:
        check.consistent = False
        check.note = f"the record has {timing.get('n')} timed calls; the supervisor saw a window of {reps}"
        return check
    # The time the worker added for other streams' work comes from gaps after each call's
    # device-wide sync, outside the events, and a host the scheduler kept waiting there widens
    # them: only the event times themselves must fit in the window (level-2 problem 48 in a
    # full batch on the H200: 3.4 ms calls, 3.8 ms added to each, 31 in a 202 ms window).
    added = max(0.0, float(timing.get("other_streams_ms") or 0.0))
    if (check.reported_mean_ms - added) * reps > check.window_ms * 1.02 + 1.0:
        check.consistent = False
        check.note = "the reported times add up to more than the timing window lasted"
        return check
    overheads = [
        s.window_ms / s.n - s.mean_ms for s in (eager, compiled) if s is not None and s.window_ms and s.n
    ]
    if not overheads:
        check.note = "no baseline window to compare with (cached before windows were recorded?)"
        return check
    check.overhead_ms = max(0.0, min(overheads))
    floor = check.window_ms / reps - check.overhead_ms * (1 + OVERHEAD_SLACK) - TIMING_SLACK_MS
    check.floor_ms = floor
    if floor <= 0:
        check.note = (
            "no bound: the loop's own cost per repetition (inputs, L2 flush) is as large as the whole "
            "repetition took here (calls far shorter than the loop, or a busy CPU)"
        )
        return check
    check.ratio = check.reported_mean_ms / floor if check.reported_mean_ms > 0 else 0.0
    check.consistent = check.ratio >= CONSISTENT_RATIO
    if not check.consistent:
        check.note = (
            f"the candidate process reported {check.reported_mean_ms:.4g} ms per call; its supervisor's "
            f"clock allows no less than {floor:.4g} ms"
        )
    return check


def timing_tampered(check: TimingCheck | None) -> str | None:
    """A violation when the reported timing cannot be squared with the supervisor's clock."""
    if check is None or check.consistent:
        return None
    if check.ratio is not None and check.ratio >= TAMPERED_RATIO:
        return None
    return f"the timing the candidate process reported is impossible: {check.note}"


def speedup(
    baseline_name: Literal["eager", "compile"], baseline: TimingStats, candidate: TimingStats
) -> Speedup:
    value = baseline.median_ms / candidate.median_ms if candidate.median_ms > 0 else math.inf
    noise = max(NOISE_FLOOR, math.hypot(baseline.relative_spread, candidate.relative_spread))
    return Speedup.banded(baseline_name, value, noise)


def performance_report(
    cand: CandidateRecord,
    *,
    eager: TimingStats | None,
    compiled: TimingStats | None,
    compile_mode: str | None,
    baseline_errors: dict[str, str],
    own_kernels: set[str],
    bytes_moved: int | None,
    bandwidth_gbps: float | None,
    bandwidth_source: str | None,
    policy: str,
) -> PerformanceReport | None:
    timing = cand.get("timing")
    if not timing:
        return None
    candidate = TimingStats.model_validate(timing)
    check = timing_check(cand, eager, compiled)
    judged = candidate
    if check is not None and not check.consistent and check.ratio:
        judged = _scaled(candidate, 1 / check.ratio)  # the supervisor's clock, not the claim
    report = PerformanceReport(
        candidate=candidate,
        eager=eager,
        compile=compiled,
        compile_mode=compile_mode,
        baseline_errors=baseline_errors,
        speedup_vs_eager=speedup("eager", eager, judged) if eager else None,
        speedup_vs_compile=speedup("compile", compiled, judged) if compiled else None,
        timing_check=check,
        profile_error=cand.get("profile_error"),
        bytes_moved=bytes_moved,
        bandwidth_gbps=bandwidth_gbps,
        bandwidth_source=bandwidth_source,  # type: ignore[arg-type]
    )
    kernels = cand.get("kernels")
    if kernels is not None:
        report.kernels, report.own_kernel_share = kernel_breakdown(
            kernels, int(cand.get("profiled_calls") or 1), own_kernels
        )
    if bytes_moved and bandwidth_gbps and bandwidth_gbps > 0 and not math.isnan(bandwidth_gbps):
        report.memory_floor_ms = bytes_moved / (bandwidth_gbps * 1e9) * 1e3
    report.flags = performance_flags(report, policy)
    return report


def _scaled(stats: TimingStats, factor: float) -> TimingStats:
    times = ("median_ms", "q1_ms", "q3_ms", "iqr_ms", "mean_ms", "std_ms", "min_ms", "max_ms")
    return stats.model_copy(update={name: getattr(stats, name) * factor for name in times})


def performance_flags(report: PerformanceReport, policy: str) -> list[Flag]:
    flags = []
    check = report.timing_check
    if check is not None and not check.consistent:
        flags.append(
            Flag(
                code="timing_inconsistent",
                message=f"{check.note}; the speedups use the supervisor's clock",
            )
        )
    if report.candidate.other_streams_ms > 0:
        flags.append(
            Flag(
                code="other_streams_time",
                message=f"work kept running on another stream after forward returned: "
                f"{1e3 * report.candidate.other_streams_ms:.1f} us per call added from the device-wide end; "
                "make the current stream wait for your streams",
            )
        )
    vs_eager = report.speedup_vs_eager
    if vs_eager and vs_eager.value > IMPLAUSIBLE_SPEEDUP:
        flags.append(
            Flag(
                code="implausible_speedup",
                message=f"{vs_eager.value:.1f}x faster than eager: check for skipped work",
            )
        )
    floor = report.memory_floor_ms
    if floor and report.candidate.median_ms < FLOOR_SLACK * floor:
        flags.append(
            Flag(
                code="below_memory_floor",
                message=f"{report.candidate.median_ms:.4g} ms is below the {floor:.4g} ms it takes to read the "
                f"inputs and write the outputs at {report.bandwidth_gbps:.0f} GB/s",
            )
        )
    if report.profile_error is None and report.candidate.method.startswith("cuda"):
        if not report.kernels:
            flags.append(Flag(code="no_kernels_ran", message="no GPU kernel ran during the profiled calls"))
        elif not any(k.own for k in report.kernels):
            names = ", ".join(k.name[:60] for k in report.kernels[:3])
            flags.append(
                Flag(
                    code="own_kernels_never_ran", message=f"none of the solution's kernels ran (ran: {names})"
                )
            )
        torch_share = sum(k.share for k in report.kernels if k.origin in ("torch", "triton"))
        if policy == "strict" and torch_share > 0:
            flags.append(
                Flag(
                    code="torch_kernels",
                    message=f"{100 * torch_share:.1f}% of device time in torch's own kernels",
                )
            )
    return flags


def first_problem(report: CorrectnessReport) -> str:
    failed = report.first_failure()
    if failed is None:
        return f"only {report.trials_run} of {report.trials_requested} trials ran"
    where = f"trial {failed.index}" if failed.kind == "trial" else f"timed call {failed.index}"
    if failed.problems:
        return f"{where}: {failed.problems[0]}"
    bad = next((d for d in failed.outputs if not d.passed), None)
    return f"{where}: {render_diff(bad)}" if bad else f"{where}: no outputs"


def correct_reason(correctness: CorrectnessReport, perf: PerformanceReport | None) -> str:
    text = f"correct on {correctness.trials_run}/{correctness.trials_requested} trials"
    if perf is None:
        return text
    for label, sp in (("eager", perf.speedup_vs_eager), ("torch.compile", perf.speedup_vs_compile)):
        if sp is not None:
            text += f"; {sp.value:.2f}x vs {label} ({sp.outcome.replace('_', ' ')})"
    return text

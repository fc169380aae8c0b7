"""A region-by-region run's second half (agent/run/by_region.py runs the regions): compose the
regions' verified solutions, judge compositions on the whole task, drop regions that slow it, and
write the output folder (model_new.py, result.json, regions.json, run.json, report.md, transcript).
"""

from __future__ import annotations

import copy
import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent.budget import BudgetUsage
from agent.referee.results import EvalResult
from agent.regions.allocate import RegionEstimate
from agent.regions.compose import composed_source
from agent.run.region_records import CompositionTrial, RegionResult, RegionRun
from agent.run.result import SolveResult
from agent.run.setup import transcript_header
from agent.tasks import Task
from agent.templates import NotCovered, Plan
from agent.tools.candidates import Referee
from agent.transcripts.format import CandidateRef, EvaluationEvent, RunEndEvent, TranscriptWriter
from agent.workspace import open_solution
from sandbox.base import open_sandbox
from sandbox.safe_files import write_file

if TYPE_CHECKING:
    from agent.run.by_region import RegionwisePolicy
    from agent.run.solve import SolveConfig

log = logging.getLogger(__name__)

MAX_COMPOSITIONS = 3
"""Compositions judged on the whole task at most: the first with every region faster alone, then
one region fewer each time (the lowest speedup of its own first) while it is not faster."""


@dataclass
class RegionAttempt:
    """One region's own run, as the allocation and the composition need it."""

    result: SolveResult | None  # None: its run failed before it had one
    spent: int
    best_after_each_unit: list[float]
    solution: str | None
    faster_alone: bool


class SolveOne(Protocol):
    def __call__(
        self,
        config: SolveConfig,
        *,
        model: Any,
        referee: Referee,
        task: Task,
        progress: Any,
        sandbox_options: Mapping[str, object] | None,
    ) -> SolveResult: ...


@dataclass
class RegionState:
    """What a region-by-region run knows as it goes: its regions' estimates, plans, tasks, runs."""

    config: SolveConfig
    policy: RegionwisePolicy
    referee: Referee
    progress: Any
    sandbox_options: Mapping[str, object]
    started: float
    times: list[float]
    estimates: list[RegionEstimate]
    results: dict[int, RegionResult]
    paths: dict[int, Path] = field(default_factory=dict)
    plans: dict[int, Plan | NotCovered] = field(default_factory=dict)
    tasks: dict[int, Task] = field(default_factory=dict)
    ran: dict[int, RegionAttempt] = field(default_factory=dict)
    usage: BudgetUsage = field(default_factory=BudgetUsage)
    times_source: str = ""
    solve_one: SolveOne | None = None
    """How a region's own task is solved: agent.run.solve.solve, handed in by it."""


def faster(result: SolveResult | EvalResult, baseline: str) -> bool:
    evaluation = result.evaluation if isinstance(result, SolveResult) else result
    perf = evaluation.performance if evaluation is not None and evaluation.verdict == "correct" else None
    if perf is None:
        return False
    speedup = perf.speedup_vs_eager if baseline == "eager" else perf.speedup_vs_compile
    return speedup is not None and speedup.outcome == "faster"


def compose_and_finish(state: RegionState, task: Task, total: int) -> SolveResult:
    config = state.config
    dry = config.allow_no_gpu and state.referee.device() is None
    candidates = [i for i, r in state.ran.items() if r.solution is not None and (dry or r.faster_alone)]
    candidates.sort(key=lambda i: -(state.results[i].speedup_eager or 0.0))
    trials: list[tuple[list[int], EvalResult, Path]] = []
    best: tuple[list[int], EvalResult, Path] | None = None
    chosen = list(candidates)
    while chosen and len(trials) < MAX_COMPOSITIONS:
        result, path = _judge(state, task, chosen, len(trials))
        trials.append((list(chosen), result, path))
        if result.verdict == "correct" and (
            best is None or _primary(result, config.baseline) > _primary(best[1], config.baseline)
        ):
            best = (list(chosen), result, path)
        if dry and result.compile.ok:  # a compile-only dry run: what builds is submitted
            best = (list(chosen), result, path)
            break
        if faster(result, config.baseline):
            break
        chosen = chosen[:-1]  # the lowest speedup of its own goes first
    submitted = best[0] if best is not None else []
    for index in candidates:
        state.results[index].status = (
            "unverified" if dry and index in submitted else ("kept" if index in submitted else "dropped")
        )
    run = RegionRun(
        task=task.name,
        allocation=config.region_allocation,
        times=state.times_source,
        total_units=total,
        covered_share=sum(r.share for r in state.results.values() if r.covered),
        regions=[state.results[r.index] for r in state.policy.regions],
        compositions=[composition_trial(regions, result, config.baseline) for regions, result, _ in trials],
        submitted=submitted if best is not None else None,
    )
    if best is not None and best[1].performance is not None:
        perf = best[1].performance
        run.speedup_eager = perf.speedup_vs_eager.value if perf.speedup_vs_eager else None
        run.speedup_compile = perf.speedup_vs_compile.value if perf.speedup_vs_compile else None
    return _write_outputs(state, task, run, trials, best, dry)


def _primary(result: EvalResult, baseline: str) -> float:
    perf = result.performance
    speedup = (
        None if perf is None else perf.speedup_vs_eager if baseline == "eager" else perf.speedup_vs_compile
    )
    return speedup.value if speedup is not None else 0.0


def _judge(state: RegionState, task: Task, chosen: list[int], k: int) -> tuple[EvalResult, Path]:
    """The composition calling `chosen` regions' solutions, judged by the referee on the whole task."""
    config, policy = state.config, state.policy
    solutions = {i: state.ran[i].solution or "" for i in chosen}
    source = composed_source(
        policy.graph, policy.regions, Path(task.path).read_text(encoding="utf-8"), solutions
    )
    path = Path(config.out) / "compose" / f"model_new_{k}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    in_torch = [r for r in policy.regions if r.index not in chosen and r.kind != "view"]
    judged_policy = "kernelbench" if in_torch else config.referee.policy
    solution = open_solution(path)
    referee = with_policy(state.referee, judged_policy)
    started = time.monotonic()
    opener = functools.partial(
        open_sandbox, config.sandbox, workspace=solution.root, **dict(state.sandbox_options)
    )
    result = referee.evaluate(task, solution, sandbox=opener, profile=True)  # type: ignore[arg-type]
    times = result.stage_times
    state.usage.gpu += times.candidate_s + times.judge_s if times.total_s > 0 else time.monotonic() - started
    log.info("composition %d (%s): %s", k, ", ".join(f"r{i:02d}" for i in chosen), result.verdict)
    return result, path


def with_policy(referee: Referee, policy: str) -> Referee:
    """The same referee judging under another operator policy (a copy; the original is unchanged)."""
    options = getattr(referee, "options", None)
    if options is None or getattr(options, "policy", policy) == policy:
        return referee
    clone = copy.copy(referee)
    object.__setattr__(clone, "options", options.model_copy(update={"policy": policy}))
    return clone


def composition_trial(regions: list[int], result: EvalResult, baseline: str) -> CompositionTrial:
    """The record of one composition the referee judged on the whole task."""
    eager, compiled = speedups(result)
    return CompositionTrial(
        regions=regions,
        policy=result.policy,
        verdict=result.verdict,
        reason=result.reason[:300],
        speedup_eager=eager,
        speedup_compile=compiled,
        faster=faster(result, baseline),
    )


def speedups(result: EvalResult) -> tuple[float | None, float | None]:
    """(vs eager, vs torch.compile), each None where not measured."""
    perf = result.performance
    return (
        perf.speedup_vs_eager.value if perf and perf.speedup_vs_eager else None,
        perf.speedup_vs_compile.value if perf and perf.speedup_vs_compile else None,
    )


def _write_outputs(
    state: RegionState,
    task: Task,
    run: RegionRun,
    trials: list[tuple[list[int], EvalResult, Path]],
    best: tuple[list[int], EvalResult, Path] | None,
    dry: bool,
) -> SolveResult:
    config, out = state.config, Path(state.config.out)
    judged = best or (trials[-1] if trials else None)
    if best is not None:
        write_file(out, "model_new.py", best[2].read_bytes())
    if judged is not None:
        write_file(out, "result.json", judged[1].model_dump_json(indent=2).encode())
    write_file(out, "regions.json", run.model_dump_json(indent=2).encode())
    if best is not None:
        status, message = ("submitted_unverified" if dry else "submitted"), run.summary_line()
    elif not state.ran:
        status, message = "model_stopped", "no covered region was given budget or could be run"
    else:
        status, message = "model_stopped", "no composition of the regions' solutions passed the referee"
    ref = None
    if best is not None:
        ref = CandidateRef(
            content_hash=best[1].solution.content_hash,
            turn=0,
            source="compose",
            verdict=best[1].verdict,
            speedup=_primary(best[1], config.baseline) or None,
        )
    usage = state.usage.model_copy(update={"wall": round(time.monotonic() - state.started, 3)})
    result = SolveResult(
        status=status,  # type: ignore[arg-type]
        message=message,
        task=task.name,
        out=out,
        baseline=config.baseline,
        best=ref if best is not None and not dry else None,
        submitted=ref,
        submitted_is_best=True if ref is not None else None,
        verified=best is not None and best[1].verdict == "correct",
        evaluation=judged[1] if judged is not None else None,
        summary=run.summary_line(),
        usage=usage,
        limits=config.budget,
    )
    _write_transcript(state, task, run, trials, best, result)
    write_file(out, "report.md", render_region_report(result, run).encode())
    files = {p.name for p in out.iterdir()} | {"run.json"}
    result = result.model_copy(update={"files": sorted(files)})
    write_file(out, "run.json", result.model_dump_json(indent=2).encode())
    return result


def _write_transcript(
    state: RegionState,
    task: Task,
    run: RegionRun,
    trials: list[tuple[list[int], EvalResult, Path]],
    best: tuple[list[int], EvalResult, Path] | None,
    result: SolveResult,
) -> None:
    """The whole run's transcript: its header holds the region plan (each region's own transcript is
    in regions/rNN/), one evaluation event a composition judged, and the run's end."""

    config = state.config
    header = transcript_header(
        task,
        model="templates (region by region)",
        config=config.model_dump(mode="json") | {"regions": run.model_dump(mode="json")},
        gpu=state.referee.device(),
        sandbox=config.sandbox,
    )
    with TranscriptWriter(Path(config.out) / "transcript.jsonl", header) as transcript:
        for regions, judged, _ in trials:
            transcript.write(
                EvaluationEvent(
                    source="compose " + ",".join(f"r{i:02d}" for i in regions),
                    content_hash=judged.solution.content_hash,
                    verdict=judged.verdict,
                    reason=judged.reason,
                    speedup=_primary(judged, config.baseline) or None,
                    baseline=config.baseline,
                    gpu_s=judged.stage_times.candidate_s + judged.stage_times.judge_s,
                    became_best=best is not None and judged is best[1],
                    result=judged.model_dump(mode="json"),
                )
            )
        transcript.write(
            RunEndEvent(
                status=result.status,
                message=result.message + "\n" + run.markdown(),
                best=result.best,
                submitted=result.submitted,
                usage=result.usage,
            )
        )


def render_region_report(result: SolveResult, run: RegionRun) -> str:
    lines = [
        f"# {result.task}: region by region",
        "",
        f"- status: {result.status}: {result.message}",
        f"- end to end: {_speed(run.speedup_eager)} vs eager, {_speed(run.speedup_compile)} vs torch.compile",
        "- each region's own run (transcript, report) is in regions/rNN/; the compositions judged are in compose/",
        "",
        run.markdown(),
    ]
    return "\n".join(lines)


def _speed(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "not measured"

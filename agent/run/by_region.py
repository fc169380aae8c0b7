"""A whole model, region by region, with the built-in template policy.

`--model templates` on a model the template library does not cover as one task (it lacks a kernel
for some operator, however small its share of the time) no longer refuses it when its covered
regions hold at least half of its estimated time: `templates_model` returns a `RegionwisePolicy`,
and `solve()` hands such a run to `solve_by_region`:

    OUT/regions/tasks/region_NN_KIND.py   each region as its own KernelBench-style task
    OUT/regions/rNN/                      each covered region's own solve run: TemplatePolicy, the
                                          referee (and the tuner when enabled) unchanged
    OUT/compose/model_new_K.py            each composition the referee judged on the whole task
    OUT/model_new.py                      the submitted composition (torch runs every other region)
    OUT/regions.json                      RegionRun: shares, budgets, results, compositions
    OUT/run.json, result.json, report.md, transcript.jsonl   as for any run

The run's candidates (`--budget turns=N`: N candidates in all) are split across the covered regions
by expected gain (agent/regions/allocate.py: the region with the largest gain runs first, and what
it leaves unspent is split again among the rest), or uniformly (`region_allocation="uniform"`).
A region no faster than eager on its own is left out. The composition of the rest is judged on the
whole task; while it is not faster than the run's baseline, the region with the lowest speedup of
its own is dropped and the rest judged again (region_compose.py, which also writes the output
folder). The fastest correct composition is submitted. One that leaves compute in torch is judged
under the kernelbench policy (torch glue allowed and reported), which strict forbids by design.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.budget import BudgetUsage
from agent.build.standalone import BUILD_DIR_PRELUDE
from agent.build.toolkit import visible_gpu_arch
from agent.messages import Message, ModelResponse, ToolSpec
from agent.models.registry import TEMPLATES_MODEL
from agent.regions.allocate import Allocation, RegionEstimate, RegionProgress, allocate, allocate_uniform
from agent.regions.extract import write_region_tasks
from agent.regions.partition import Region, partition
from agent.regions.whole import RegionCoverage, coverage, region_summary
from agent.run.region_compose import RegionAttempt, RegionState, SolveOne, compose_and_finish, faster
from agent.run.region_records import RegionResult
from agent.run.result import SolveResult
from agent.tasks import Task, TaskLoadError, instantiate_tasks, load_task, parse_task
from agent.templates import (
    NotCovered,
    OpGraph,
    Plan,
    TemplatePolicy,
    build_policy,
    recognize,
    trace_task,
    trace_tasks,
    visible_device_limits,
)
from agent.tools.candidates import Referee
from agent.tune.space import DeviceLimits

if TYPE_CHECKING:
    from agent.run.solve import SolveConfig

log = logging.getLogger(__name__)

RUN_TURNS = 6
"""Turns a region's run gets besides one a candidate: the first candidate's separate compile, the
restore-and-submit turn and the policy's reserve (agent/templates/policy.py RESERVED_TURNS)."""
DEFAULT_UNITS = 24
MIN_COVERED_SHARE = 0.5
"""A model whose covered regions hold less of its estimated time is refused as before: what stays in
torch is then no minor operator, and the regions could not make the whole much faster."""


@dataclass
class RegionwisePolicy:
    """`--model templates` for a model the library covers region by region only. Not a loop's
    model: `solve()` runs it with `solve_by_region`."""

    task_path: Path
    graph: OpGraph
    regions: list[Region]
    coverage: list[RegionCoverage]
    reason: str = ""
    gpu: DeviceLimits | None = None
    name: str = TEMPLATES_MODEL

    def query(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], *, max_output_tokens: int | None = None
    ) -> ModelResponse:
        raise RuntimeError("a region-by-region run is driven by solve_by_region, not by the agent loop")


def templates_model(
    task_path: Path, *, sandbox_kind: str = "local"
) -> TemplatePolicy | RegionwisePolicy | NotCovered:
    """The template policy for a task: one plan for the whole task when the library covers it,
    else region by region when its covered regions hold at least MIN_COVERED_SHARE of the estimated
    time, else why not."""
    policy = build_policy(Path(task_path), sandbox_kind=sandbox_kind)
    if not isinstance(policy, NotCovered) or not policy.ops:  # ops: it was traced, regions exist
        return policy
    graph = trace_task(Path(task_path), sandbox_kind=sandbox_kind)
    regions = partition(graph)
    found = coverage(graph, regions)
    total = sum(r.eager_s for r in regions) or 1e-30
    share = sum(r.eager_s for r, c in zip(regions, found, strict=True) if c.covered) / total
    if share < MIN_COVERED_SHARE:
        summary = region_summary(graph)
        if not summary:
            return policy
        needs = f"a run region by region needs {MIN_COVERED_SHARE:.0%}"
        return policy.model_copy(update={"reason": f"{policy.reason}; {summary} ({needs})"})
    return RegionwisePolicy(
        Path(task_path), graph, regions, found, reason=policy.reason, gpu=visible_device_limits()
    )


def solve_by_region(
    config: SolveConfig,
    policy: RegionwisePolicy,
    *,
    solve_one: SolveOne,
    referee: Referee,
    task: Task,
    progress: Any = None,
    sandbox_options: Mapping[str, object] | None = None,
) -> SolveResult:
    """Solve each covered region as its own task with `solve_one` (agent.run.solve.solve, passed in
    by it), compose, judge the whole, submit the composition."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    state = _setup(config, policy, referee, progress, dict(sandbox_options or {}), time.monotonic())
    state.solve_one = solve_one
    total = config.budget.turns or DEFAULT_UNITS
    if config.region_allocation == "uniform":
        final = _run_uniform(state, total)
    else:
        final = _run_by_gain(state, total)
    for share in final.shares:
        state.results[share.region].allocation_status = share.status
    return compose_and_finish(state, task, total)


def _setup(
    config: SolveConfig,
    policy: RegionwisePolicy,
    referee: Referee,
    progress: Any,
    sandbox_options: dict[str, object],
    started: float,
) -> RegionState:
    graph, regions = policy.graph, policy.regions
    written = write_region_tasks(graph, regions, Path(config.out) / "regions" / "tasks")
    measure = referee.device() is not None and visible_gpu_arch() is not None  # nvidia-smi: no CUDA context
    times, source = region_times(policy, measure=measure, sandbox_kind=config.sandbox)
    total_time = sum(times) or 1e-30
    estimates, results = [], {}
    for region, found, time_s in zip(regions, policy.coverage, times, strict=True):
        estimates.append(
            RegionEstimate(
                region=region.index,
                label=region.label,
                time_s=time_s,
                floor_s=min(region.floor_s, time_s),
                covered=found.covered,
            )
        )
        results[region.index] = RegionResult(
            region=region.index,
            label=region.label,
            kind=region.kind,
            share=time_s / total_time,
            covered=found.covered,
            reason=found.reason,
            status="not run" if found.covered else "not covered",
        )
    state = RegionState(
        config, policy, referee, progress, sandbox_options, started, times, estimates, results
    )
    state.paths = {w.region: w.path for w in written}
    state.times_source = source
    log.info("%s: %d regions, times %s", Path(config.task).name, len(regions), source)
    return state


def region_times(policy: RegionwisePolicy, *, measure: bool, sandbox_kind: str) -> tuple[list[float], str]:
    """Each region's eager time: measured under torch.profiler on the GPU when there is one (the
    estimate from its operators' floors when not, or when profiling fails), and where it came from."""
    estimated = [r.eager_s for r in policy.regions]
    if not measure:
        return estimated, "estimated from the floors (no GPU)"
    from agent.regions.hot import join_times
    from agent.regions.hot import measure as profile
    from sandbox.paths import gpu_gate_dir
    from sandbox.workers.gpu.gpu_gate import GpuGate, gate_path

    gate = gate_path(gpu_gate_dir(), "0")  # the GPU the profile runs on, as every referee timing holds it
    Path(gate).parent.mkdir(parents=True, exist_ok=True)
    try:
        with GpuGate(gate) as held:
            held.hold("exclusive")  # no evaluation beside it is timed meanwhile
            seconds = join_times(policy.graph, profile(policy.task_path, sandbox_kind=sandbox_kind))
    except Exception as exc:  # the allocation still works on estimates
        log.warning("profiling the regions failed (%s); allocating on estimates", exc)
        return estimated, f"estimated from the floors (profiling failed: {str(exc)[:200]})"
    times = [sum(seconds[i] for i in r.nodes) for r in policy.regions]
    if sum(times) <= 0:
        return estimated, "estimated from the floors (the profile was empty)"
    return times, "measured (torch.profiler on the GPU)"


def _plan(state: RegionState, indices: list[int]) -> None:
    """Trace those covered regions' task files not planned yet (one worker for all) and match each to
    the library, and load those tasks (one sandbox for all): the plans name the region task's own
    parameters. Only regions about to get budget are planned: a model may have hundreds."""
    todo = [i for i in indices if i not in state.plans]
    if not todo:
        return
    graphs = trace_tasks([state.paths[i] for i in todo], sandbox_kind=state.config.sandbox)
    for index, graph in zip(todo, graphs, strict=True):
        if isinstance(graph, Exception):
            state.plans[index] = NotCovered(task=state.paths[index].stem, reason=f"not traced: {graph}")
        else:
            state.plans[index] = recognize(graph)
    loadable = [i for i in todo if isinstance(state.plans[i], Plan)]
    try:
        loaded = instantiate_tasks(
            [parse_task(state.paths[i]) for i in loadable], sandbox_kind=state.config.sandbox
        )
        state.tasks |= dict(zip(loadable, loaded, strict=True))
    except TaskLoadError:  # one region task that does not load: the others still run
        for index in loadable:
            try:
                state.tasks[index] = load_task(state.paths[index], sandbox_kind=state.config.sandbox)
            except TaskLoadError as exc:
                state.plans[index] = NotCovered(task=state.paths[index].stem, reason=f"does not load: {exc}")
    for index in todo:
        plan = state.plans[index]
        if isinstance(plan, NotCovered):
            result = state.results[index]
            result.status, result.reason = "failed", f"as its own task: {plan.reason}"


def _run_by_gain(state: RegionState, total: int) -> Allocation:
    """Regions in order of expected gain; each gets its share of what is left, and what it does not
    spend is split again among the rest."""
    pending = [e for e in state.estimates if e.covered]
    first = allocate(total, pending).shares
    _plan(state, [s.region for s in first if s.next_units > 0])
    remaining = total
    while pending and remaining > 0 and _budget_left(state):
        shares = allocate(remaining, pending).shares
        share = max(shares, key=lambda s: (s.next_units > 0, s.expected_gain_s, -s.region))
        if share.next_units <= 0:
            break
        pending = [e for e in pending if e.region != share.region]
        _plan(state, [share.region])
        if share.region not in state.tasks:
            continue  # not covered as its own task after all: its share goes to the rest
        ran = _run_region(state, share.region, share.next_units)
        remaining -= max(ran.spent, 1)
    progress = [
        RegionProgress(region=i, best_after_each_unit=r.best_after_each_unit) for i, r in state.ran.items()
    ]
    return allocate(total, state.estimates, progress)


def _run_uniform(state: RegionState, total: int) -> Allocation:
    """The baseline: every covered region the same candidates, in the model's order."""
    plan = allocate_uniform(total, state.estimates)
    _plan(state, [s.region for s in plan.shares if s.next_units > 0])
    for share in plan.shares:
        if share.next_units > 0 and share.region in state.tasks and _budget_left(state):
            _run_region(state, share.region, share.next_units)
    return plan


def _budget_left(state: RegionState) -> bool:
    limits = state.config.budget
    wall = time.monotonic() - state.started
    return (limits.wall is None or wall < limits.wall) and (
        limits.gpu is None or state.usage.gpu < limits.gpu
    )


def _run_region(state: RegionState, index: int, units: int) -> RegionAttempt:
    """The region's task through the normal solve path with the template policy, `units` candidates."""
    config, limits = state.config, state.config.budget
    plan = state.plans[index]
    assert isinstance(plan, Plan)
    model = TemplatePolicy.for_task(state.paths[index], plan, gpu=state.policy.gpu, max_candidates=units)
    wall_left = None if limits.wall is None else max(1.0, limits.wall - (time.monotonic() - state.started))
    gpu_left = None if limits.gpu is None else max(1.0, limits.gpu - state.usage.gpu)
    out = Path(config.out) / "regions" / f"r{index:02d}"
    sub = config.model_copy(
        update={
            "task": state.paths[index],
            "out": out,
            "budget": limits.model_copy(
                update={"turns": units + RUN_TURNS, "wall": wall_left, "gpu": gpu_left}
            ),
        }
    )
    log.info("region r%02d: %d candidate(s)", index, units)
    record = state.results[index]
    record.units, record.out = units, str(out)
    try:
        assert state.solve_one is not None, "solve_by_region sets it"
        result = state.solve_one(
            sub,
            model=model,
            referee=state.referee,
            task=state.tasks[index],
            progress=state.progress,
            sandbox_options=state.sandbox_options,
        )
    except Exception as exc:  # one region's failure must not lose the others' work
        log.exception("region r%02d failed", index)
        record.status, record.reason = "failed", f"{type(exc).__name__}: {exc}"[:300]
        state.ran[index] = RegionAttempt(None, 0, [], None, False)
        return state.ran[index]
    _add_usage(state.usage, result.usage)
    search = model.search
    spent = len(search.judged) if search is not None else 0
    ran = RegionAttempt(
        result=result,
        spent=spent,
        best_after_each_unit=_history(state.estimates[_position(state, index)].time_s, result, model),
        solution=_solution_text(out) if result.verified or result.status == "submitted_unverified" else None,
        faster_alone=faster(result, "eager"),
    )
    state.ran[index] = ran
    perf = result.evaluation.performance if result.verified and result.evaluation else None
    record.spent = spent
    if perf is not None:
        record.speedup_eager = perf.speedup_vs_eager.value if perf.speedup_vs_eager else None
        record.speedup_compile = perf.speedup_vs_compile.value if perf.speedup_vs_compile else None
    if ran.solution is None:
        record.status = "failed"
    elif result.verified and not ran.faster_alone:
        record.status = "slower alone" if record.speedup_eager is not None else "unmeasured"
    return ran


def _position(state: RegionState, index: int) -> int:
    return next(k for k, e in enumerate(state.estimates) if e.region == index)


def _history(time_s: float, result: SolveResult, model: TemplatePolicy) -> list[float]:
    """The region's best time after each candidate, in the estimate's seconds: the candidates' own
    times scaled by the region's eager time as the referee measured it."""
    perf = result.evaluation.performance if result.evaluation else None
    eager = perf.eager if perf is not None else None
    search = model.search
    if eager is None or search is None or eager.median_ms <= 0:
        return [time_s for _ in range(len(search.judged) if search else 0)]
    scale = time_s / eager.median_ms
    best, history = time_s, []
    for _, outcome in search.history:
        if outcome.ok and outcome.ms is not None:
            best = min(best, outcome.ms * scale)
        history.append(best)
    return history


def _solution_text(out: Path) -> str | None:
    path = out / "model_new.py"
    return BUILD_DIR_PRELUDE + path.read_text(encoding="utf-8") if path.is_file() else None


def _add_usage(total: BudgetUsage, used: BudgetUsage) -> None:
    total.turns += used.turns
    total.gpu += used.gpu
    total.in_tokens += used.in_tokens
    total.out_tokens += used.out_tokens
    total.usd += used.usd

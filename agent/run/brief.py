"""The task brief: what the referee knows about a task, gathered once before the first turn and
rendered into the task prompt.

- outputs: the shapes and dtypes forward returns (the task's spec, learned on the meta device);
- baselines: eager and torch.compile on this GPU, timed by the referee's own judge with no candidate
  (a judge run with no trials) and cached per task and GPU in the referee's baseline cache, with the
  copy bandwidth the memory floor is computed from;
- work: FLOPs and compulsory bytes from the reference's traced op graph, and the memory and compute
  floors on this GPU (agent.referee.roofline);
- tolerances per output dtype, the target, how profile ranks, and whether the template library
  covers the task (start_from_template);
- for a whole model (more than one fusible region), the hot-region table (agent.regions.hot): the
  top regions by share of the forward's time, from the same trace. Its times are the floor-based
  estimates, labelled as such: measuring them (torch.profiler) is GPU time before the first turn
  that nothing caches.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from agent.referee.baselines import BaselineCache, Baselines
from agent.referee.options import EvalOptions
from agent.referee.policy import TolerancePolicy
from agent.referee.roofline import GpuPeaks, WorkEstimate, gpu_peaks, human_count
from agent.regions.hot import HotRegion, HotRegionTable, build_table
from agent.regions.partition import partition
from agent.regions.whole import coverage
from agent.run.work import estimate_work
from agent.tasks import ArgSpec, Task
from agent.templates.graph import OpGraph, TraceError, trace_task
from agent.templates.plan import NotCovered
from agent.templates.recognize import recognize
from sandbox.base import Sandbox
from sandbox.workers.protocol import JudgeSpec

NO_GPU = "not measured here (no GPU)"
BASELINE_TIMEOUT_S = 900.0
HOT_ROWS = 8  # regions listed by name; the rest are summed in one row


class BaselineTimes(BaseModel):
    """Eager and torch.compile medians on one GPU, and its measured copy bandwidth."""

    eager_ms: float | None = None
    compile_ms: float | None = None
    compile_mode: str | None = None
    bandwidth_gbps: float | None = None
    noise: dict[str, float] = Field(default_factory=dict, description="half the IQR over the median, per arm")
    cached: bool = False
    errors: dict[str, str] = Field(default_factory=dict)


class TaskFacts(BaseModel):
    """Everything the brief says, as data (the brief is its rendering)."""

    gpu: str | None = None
    outputs: list[ArgSpec] | None = None
    baselines: BaselineTimes | None = None
    baselines_note: str = NO_GPU
    work: WorkEstimate | None = None
    work_note: str = ""
    peaks: GpuPeaks | None = None
    tolerances: TolerancePolicy
    baseline: str = "compile"
    covered: bool | None = None
    coverage_note: str = ""
    hot: HotRegionTable | None = Field(
        default=None, description="a whole model's regions by share of its time; None for one region"
    )
    hot_note: str = Field(default="", description="why a traced task has no hot-region table")


class TracedFacts(BaseModel):
    """What one sandboxed trace of the reference gives the brief."""

    work: WorkEstimate | None = None
    work_note: str = ""
    covered: bool | None = None
    coverage_note: str = "unknown"
    hot: HotRegionTable | None = None
    hot_note: str = ""


def trace_facts(task: Task, sandbox_kind: str) -> TracedFacts:
    """The work, the template library's coverage and the hot-region table from one sandboxed trace."""
    try:
        graph = trace_task(task.path, sandbox_kind=sandbox_kind)
    except TraceError as exc:
        return TracedFacts(
            work_note=f"not traced: {str(exc)[:200]}", coverage_note="unknown (the task could not be traced)"
        )
    facts = TracedFacts()
    try:
        facts.work = estimate_work(graph)
    except (IndexError, ValueError, TypeError) as exc:  # an operator whose arguments the counter misreads
        facts.work_note = f"not counted: {type(exc).__name__}: {str(exc)[:120]}"
    facts.hot, facts.hot_note = hot_region_table(graph)
    try:
        plan = recognize(graph)
    except Exception as exc:  # the recognizer's own bug must not stop a run: the brief just says so
        facts.coverage_note = f"unknown (the template recognizer failed: {type(exc).__name__})"
        return facts
    if isinstance(plan, NotCovered):
        lacking = f"the template library lacks {', '.join(plan.ops)}" if plan.ops else plan.reason[:160]
        facts.covered, facts.coverage_note = False, f"not covered: {lacking}"
    else:
        facts.covered = True
        facts.coverage_note = (
            f"covered ({plan.family} family): start_from_template writes a working, tunable start"
        )
    return facts


def hot_region_table(graph: OpGraph) -> tuple[HotRegionTable | None, str]:
    """(the hot-region table of a model of several regions, why there is none). The estimate from
    the floors, from the trace alone: no GPU time."""
    try:
        regions = partition(graph)
        if len(regions) < 2:
            return None, "one region"
        return build_table(graph, regions, coverage(graph, regions)), ""
    except Exception as exc:  # the partitioner's own bug must not stop a run: the brief just lacks the table
        return None, f"not partitioned: {type(exc).__name__}: {str(exc)[:120]}"


def measure_baselines(
    task: Task, options: EvalOptions, sandbox: Sandbox, *, gpu: str, cache: BaselineCache | None = None
) -> BaselineTimes:
    """Eager and torch.compile timed once on this GPU by the referee's judge (no candidate: a judge
    run with no trials), or taken from the baseline cache the referee reads them from later."""
    from agent.referee.evaluate import _gate_file, _torch_version, host_gpu
    from agent.referee.processes import JudgeProcess, Seeds
    from agent.referee.results import DeviceInfo
    from sandbox.workers.gpu.timing import TIMING_VERSION, TimingConfig

    on_gpu = options.device == "cuda"
    device = host_gpu() if on_gpu else DeviceInfo(name="cpu", torch=_torch_version())
    if device is None:
        return BaselineTimes(errors={"gpu": "no CUDA GPU visible to torch"})
    timing = options.timing or TimingConfig()
    # The same key as agent.referee.evaluate plans, so a profile later reads these numbers.
    baselines = Baselines.plan(
        cache if cache is not None else BaselineCache(),
        task_sha256=task.sha256,
        input_spec=task.spec.model_dump_json() if task.spec else "",
        gpu=device.name,
        torch=device.torch,
        compile_mode=options.baseline_compile_mode(),
        timing=json.dumps({**timing.to_dict(), "version": TIMING_VERSION}, sort_keys=True),
        refresh=options.refresh_baselines,
        configured_bandwidth=options.bandwidth_gbps,
    )
    request = baselines.request(measure_bandwidth=on_gpu)
    wanted = request["baselines"]
    judged: dict = {}
    if wanted["eager"] or wanted["compile_mode"] or request["measure_bandwidth"]:
        gate = _gate_file(options.gpu_gate, sandbox, options.device)
        seeds = Seeds.fresh(1)
        spec: JudgeSpec = {
            "device": options.device,
            "task_source": task.source,
            "task_filename": str(task.path),
            "init_seed": seeds.init,
            "state_seed": seeds.state,
            "trial_seeds": seeds.trials,
            "exchange_dir": "",
            "trials": [],
            "rechecks": [],
            "tolerances": options.tolerances().for_worker(),
            "timing": timing.to_dict(),
            "gpu_gate": gate,
            **request,
        }
        judge = JudgeProcess(device=options.device, visible=[Path(gate).parent] if gate else [])
        try:
            result, run = judge.run(spec, timeout=BASELINE_TIMEOUT_S)
        finally:
            judge.abandon()
        if result is None or not result.get("ok"):
            why = ((result or {}).get("failure") or {}).get("message") or run.describe_failure()
            return BaselineTimes(errors={"judge": f"the baselines could not be timed: {why}"[:300]})
        judged = dict(result)
    baselines.resolve(judged)  # type: ignore[arg-type]
    stats = baselines.stats
    eager, compiled = stats.get("eager"), stats.get("compile")
    return BaselineTimes(
        eager_ms=eager.median_ms if eager is not None else None,
        compile_ms=compiled.median_ms if compiled is not None else None,
        compile_mode=baselines.compile_mode,
        bandwidth_gbps=baselines.bandwidth,
        noise={arm: s.relative_spread for arm, s in stats.items() if s is not None},
        cached=any(s is not None for s in stats.values())
        and all(s.cached for s in stats.values() if s is not None),
        errors=dict(baselines.errors),
    )


def gather_facts(
    task: Task,
    *,
    options: EvalOptions,
    gpu: str | None,
    baseline: str,
    sandbox_kind: str = "local",
    trace: bool = True,
    baselines: BaselineTimes | None = None,
    baselines_note: str = NO_GPU,
) -> TaskFacts:
    """The brief's facts. `baselines` comes from `measure_baselines` (None: `baselines_note` says why
    there are no numbers); `trace` False leaves FLOPs, bytes and coverage out (a task that was not
    inspected)."""
    traced = (
        trace_facts(task, sandbox_kind)
        if trace
        else TracedFacts(work_note="not traced (the task was not inspected)")
    )
    return TaskFacts(
        gpu=gpu,
        outputs=task.spec.outputs if task.spec else None,
        baselines=baselines,
        baselines_note=baselines_note,
        work=traced.work,
        work_note=traced.work_note,
        peaks=gpu_peaks(gpu),
        tolerances=options.tolerances(),
        baseline=baseline,
        covered=traced.covered,
        coverage_note=traced.coverage_note,
        hot=traced.hot,
        hot_note=traced.hot_note,
    )


def _ms(value: float | None) -> str:
    return f"{value:.4g} ms" if value is not None else "-"


def _baseline_line(facts: TaskFacts) -> str:
    b = facts.baselines
    if b is None:
        return facts.baselines_note
    if b.eager_ms is None and b.compile_ms is None:
        return "not measured (" + "; ".join(b.errors.values())[:200] + ")"
    mode = f"[{b.compile_mode}]" if b.compile_mode else ""
    noise = ", ".join(f"{arm} ±{100 * n:.1f}%" for arm, n in b.noise.items())
    failed = "".join(f"; {arm} failed: {error[:120]}" for arm, error in b.errors.items())
    return (
        f"eager {_ms(b.eager_ms)}, torch.compile{mode} {_ms(b.compile_ms)} on this GPU"
        f"{f' (noise {noise})' if noise else ''}{failed}"
    )


def _floors_line(facts: TaskFacts) -> str:
    work = facts.work
    if work is None:
        return "unknown (" + facts.work_note + ")"
    bandwidth = facts.baselines.bandwidth_gbps if facts.baselines else None
    if bandwidth:
        memory = f"memory {work.memory_floor_ms(bandwidth):.4g} ms at the measured {bandwidth:.0f} GB/s"
    else:
        memory = "memory: bandwidth not measured" if facts.gpu else f"memory: {NO_GPU}"
    peaks = facts.peaks
    if peaks is None:
        compute = "compute: unknown GPU (no peak rates for it)" if facts.gpu else "compute: no GPU"
    else:
        compute = (
            f"compute {work.compute_floor_ms(peaks, tensor_cores=True):.4g} ms with tensor cores "
            f"({work.compute_floor_ms(peaks, tensor_cores=False):.4g} ms on FP32 cores alone; "
            f"{peaks.model}: FP32 {peaks.fp32:g}, TF32 {peaks.tf32:g}, FP16/BF16 {peaks.fp16:g} TFLOP/s)"
        )
    return f"{memory}; {compute}"


def _tolerance_line(facts: TaskFacts) -> str:
    dtypes = sorted({o.dtype for o in facts.outputs or [] if o.dtype}) or ["float32"]
    parts = []
    for dtype in dtypes:
        tol = facts.tolerances.for_dtype(dtype)
        parts.append(f"{dtype}: atol {tol.atol:g}, rtol {tol.rtol:g}, norm {tol.norm_rtol:g}")
    return (
        "; ".join(parts)
        + " (|yours - ref| <= atol + rtol*|ref| per element, and ||yours - ref|| / ||ref|| <= norm)"
    )


def _hot_cells(
    label: str, share: float, flops: float, nbytes: float, pct: str, headroom_s: float, lib: str
) -> str:
    name = label if len(label) <= 40 else label[:37] + "..."
    return (
        f"{name:<40} {100 * share:5.1f}% {flops / 1e9:9.1f} {nbytes / 1e6:8.1f} {pct:>7} "
        f"{headroom_s * 1e6:11.0f}  {lib}"
    )


def render_hot_regions(table: HotRegionTable, rows: int = HOT_ROWS) -> str:
    """The brief's hot-region row: a sentence, then the top regions by share (at most `rows`, the
    rest summed in one row), indented under it."""
    how = (
        table.source
        if table.measured
        else f"estimated from each region's FLOPs and bytes at {table.rates.name} rates, not measured on this GPU"
    )
    lines = [
        f"{len(table.regions)} fusible regions by share of the forward's time, {how}; "
        f"the template library has templates for {100 * table.covered_share:.0f}% of it "
        "(open_region N works on region rN alone, as a task of its own; compose_regions puts the verified "
        "regions into the whole model and keeps torch for the rest)",
        f"{'region'.ljust(40)} {'share':>6} {'GFLOP':>9} {'MB':>8} {'% floor':>7} {'headroom us':>11}  template",
    ]
    shown: list[HotRegion] = table.regions if len(table.regions) <= rows + 1 else table.regions[:rows]
    for r in shown:
        lib = "yes" if r.covered else "no"
        lines.append(
            _hot_cells(r.label, r.share, r.flops, r.bytes, f"{r.pct_of_floor:.0f}%", r.headroom_s, lib)
        )
    rest = table.regions[len(shown) :]
    if rest:
        rest_s = sum(r.time_s for r in rest)
        rest_pct = f"{100 * sum(r.floor_s for r in rest) / rest_s:.0f}%" if rest_s > 0 else ""
        lines.append(
            _hot_cells(
                f"{len(rest)} more regions",
                sum(r.share for r in rest),
                sum(r.flops for r in rest),
                sum(r.bytes for r in rest),
                rest_pct,
                sum(r.headroom_s for r in rest),
                f"{sum(r.covered for r in rest)} of {len(rest)}",
            )
        )
    return "\n    ".join(lines)


def render_brief(facts: TaskFacts) -> str:
    """The brief as aligned lines for the task prompt."""
    outputs = ", ".join(o.describe() for o in facts.outputs) if facts.outputs else "unknown (not run on meta)"
    if facts.work is not None:
        w = facts.work
        work = (
            f"{human_count(w.flops, 'FLOP')} ({human_count(w.matmul_flops, 'FLOP')} in matrix products), "
            f"{human_count(w.bytes, 'B')} compulsory traffic (inputs, weights, outputs once)"
        )
    else:
        work = "unknown (" + facts.work_note + ")"
    ranked = "torch.compile" if facts.baseline == "compile" else "eager PyTorch"
    rows = [
        ("Outputs", outputs),
        ("Baselines", _baseline_line(facts)),
        ("Work", work),
        ("Floors", _floors_line(facts)),
        ("Tolerance", _tolerance_line(facts)),
        ("Target", f"faster than {ranked} beyond the measured noise; eager is reported too"),
        (
            "Ranking",
            f"profile times yours against both baselines (median of many runs, L2 flushed); the best "
            f"correct candidate by speedup vs {ranked} is kept and returned",
        ),
        ("Library", facts.coverage_note),
    ]
    if facts.hot is not None:
        rows.append(("Hot regions", render_hot_regions(facts.hot)))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"- {name.ljust(width)}  {value}" for name, value in rows)

"""The task brief: what the referee knows about a task, gathered once before the first turn and
rendered into the task prompt.

- outputs: the shapes and dtypes forward returns (the task's spec, learned on the meta device);
- baselines: eager and torch.compile on this GPU, timed by the referee's own judge with no candidate
  (a judge run with no trials) and cached per task and GPU in the referee's baseline cache, with the
  copy bandwidth the memory floor is computed from;
- work: FLOPs and compulsory bytes from the reference's traced op graph, and the memory and compute
  floors on this GPU (agent.referee.roofline);
- tolerances per output dtype, the target, how profile ranks, and whether the template library
  covers the task (start_from_template).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from agent.referee.baselines import BaselineCache, Baselines
from agent.referee.options import EvalOptions
from agent.referee.policy import TolerancePolicy
from agent.referee.roofline import GpuPeaks, WorkEstimate, gpu_peaks, human_count
from agent.run.work import estimate_work
from agent.tasks import ArgSpec, Task
from agent.templates.graph import TraceError, trace_task
from agent.templates.plan import NotCovered
from agent.templates.recognize import recognize
from sandbox.base import Sandbox

NO_GPU = "not measured here (no GPU)"
BASELINE_TIMEOUT_S = 900.0


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


def trace_facts(task: Task, sandbox_kind: str) -> tuple[WorkEstimate | None, str, bool | None, str]:
    """(work, why none, covered by the template library, what it lacks) from one sandboxed trace."""
    try:
        graph = trace_task(task.path, sandbox_kind=sandbox_kind)
    except TraceError as exc:
        return None, f"not traced: {str(exc)[:200]}", None, "unknown (the task could not be traced)"
    try:
        work, work_note = estimate_work(graph), ""
    except (IndexError, ValueError, TypeError) as exc:  # an operator whose arguments the counter misreads
        work, work_note = None, f"not counted: {type(exc).__name__}: {str(exc)[:120]}"
    try:
        plan = recognize(graph)
    except Exception as exc:  # the recognizer's own bug must not stop a run: the brief just says so
        return work, work_note, None, f"unknown (the template recognizer failed: {type(exc).__name__})"
    if isinstance(plan, NotCovered):
        lacking = f"the template library lacks {', '.join(plan.ops)}" if plan.ops else plan.reason[:160]
        return work, work_note, False, f"not covered: {lacking}"
    return (
        work,
        "",
        True,
        f"covered ({plan.family} family): start_from_template writes a working, tunable start",
    )


def measure_baselines(
    task: Task, options: EvalOptions, sandbox: Sandbox, *, gpu: str, cache: BaselineCache | None = None
) -> BaselineTimes:
    """Eager and torch.compile timed once on this GPU by the referee's judge (no candidate: a judge
    run with no trials), or taken from the baseline cache the referee reads them from later."""
    from agent.referee.evaluate import _gate_file, _torch_version, host_gpu
    from agent.referee.processes import JudgeProcess, Seeds
    from agent.referee.results import DeviceInfo
    from sandbox.workers.timing import TIMING_VERSION, TimingConfig

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
        spec = {
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
    work, work_note, covered, coverage = None, "not traced (the task was not inspected)", None, "unknown"
    if trace:
        work, work_note, covered, coverage = trace_facts(task, sandbox_kind)
    return TaskFacts(
        gpu=gpu,
        outputs=task.spec.outputs if task.spec else None,
        baselines=baselines,
        baselines_note=baselines_note,
        work=work,
        work_note=work_note,
        peaks=gpu_peaks(gpu),
        tolerances=options.tolerances(),
        baseline=baseline,
        covered=covered,
        coverage_note=coverage,
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
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"- {name.ljust(width)}  {value}" for name, value in rows)

"""`evaluate(task, solution, options)`: compile, verify, profile. The one entry point the agent's
tools, the batch runner and `agent eval` call; `options` is agent.referee.options.EvalOptions.

Stages and processes: compile (Sandbox) -> candidate worker (Sandbox; a fresh process; imports
the candidate) -> judge (host process; never imports the candidate; started early and given
its spec only after the candidate exited). Seeds come fresh from `secrets` on every call.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from agent.build.compile import CompileResult, compile_solution
from agent.gpus import first_device
from agent.referee import assemble
from agent.referee.baselines import BaselineCache, Baselines
from agent.referee.kernels import own_kernel_names, solution_sources
from agent.referee.options import EvalOptions, GateOption
from agent.referee.policy import TolerancePolicy
from agent.referee.processes import (
    CandidateRun,
    Exchange,
    JudgeProcess,
    Seeds,
    candidate_failure,
    open_exchange,
    run_candidate,
    stderr_tail,
)
from agent.referee.results import (
    DeviceInfo,
    EvalResult,
    FailureReport,
    PerformanceReport,
    PolicyReport,
    PrecisionReport,
    SolutionRef,
    StageTimes,
    TaskRef,
)
from agent.tasks import Task, load_task
from agent.verdicts import Verdict
from agent.workspace import (
    EXTENSION_NAME,
    MODEL_ENTRY,
    SingleFileSolution,
    Solution,
    Workspace,
    materialize,
)
from sandbox.base import ExecResult, Sandbox, open_sandbox
from sandbox.paths import gpu_gate_dir
from sandbox.workers.gpu import gpu_handoff, gpu_memory
from sandbox.workers.gpu.gpu_gate import GpuGate, gate_files, gate_path, physical_gate_path
from sandbox.workers.gpu.timing import TIMING_VERSION, TimingConfig
from sandbox.workers.protocol import (
    CandidateRecord,
    CandidateSpec,
    JudgeResult,
    JudgeSpec,
    RefereeTask,
    SolutionSpec,
    SupervisedRecheck,
)
from sandbox.workers.referee.precision import PRECISIONS

RECHECKS = 2  # timed calls whose outputs the judge rechecks
PROFILE_CALLS = 5
GPU_TEARDOWN_GRACE_S = 3.0
GPU_MEMORY_BUDGET = 0.92  # of the GPU's memory, shared out among the evaluations on it (gpu_memory)
MEMORY_WAIT_S = 3600.0  # a queue behind the GPU's other evaluations (a batch's full-size level 1)
CONTEXTS_BYTES = 3 << 30  # the two CUDA contexts, workspaces and the judge's compare chunks


@functools.cache
def host_gpu() -> DeviceInfo | None:
    """The GPU the judge will use, as the host sees it (CUDA_VISIBLE_DEVICES applies)."""
    import torch

    props = first_device()
    if props is None:
        return None
    return DeviceInfo(name=props.name, torch=torch.__version__, capability=f"{props.major}.{props.minor}")


def evaluate(
    task: Task | Path | str,
    solution: Solution | Path | str,
    options: EvalOptions | None = None,
    *,
    sandbox: Sandbox | str = "local",
    baseline_cache: BaselineCache | None = None,
) -> EvalResult:
    """Judge `solution` against `task` with `options` (agent.referee.options.EvalOptions; default:
    its defaults). `sandbox`: a Sandbox, or the kind of one to open (and close) for this call."""
    started = time.monotonic()
    options = options or EvalOptions()
    kind = sandbox if isinstance(sandbox, str) else sandbox.kind
    task = task if isinstance(task, Task) else load_task(Path(task), sandbox_kind=kind)
    target = materialize(task, Path(solution)) if isinstance(solution, str | Path) else solution
    box = open_sandbox(sandbox, workspace=target.root) if isinstance(sandbox, str) else sandbox
    try:
        compiled = compile_solution(target, box, arch=options.arch, timeout=options.compile_timeout_s)
        return judge_compiled(
            task, target, compiled, options, sandbox=box, baseline_cache=baseline_cache, started=started
        )
    finally:
        if isinstance(sandbox, str):
            box.close()


def judge_compiled(
    task: Task,
    solution: Solution,
    compiled: CompileResult,
    options: EvalOptions | None = None,
    *,
    sandbox: Sandbox,
    baseline_cache: BaselineCache | None = None,
    started: float | None = None,
) -> EvalResult:
    """Verify and profile a solution that `compile_solution` built (the part after compile).
    `options.arch` and `options.compile_timeout_s` were the build's; `started`: when the
    evaluation began (its total time counts from there).

    A candidate that ran out of GPU memory while other evaluations held part of it is judged once
    more with the GPU's whole memory to itself: the estimate of what each evaluation needs
    (memory_need) can fall short (a convolution's workspace, say), and the others' share is not the
    candidate's fault. Out of memory with the GPU to itself is. So is the referee's own want of
    room beside others (the judge could not take a 7.5 GB output with 7.6 GB free, level-1 RMSNorm
    in a full-size batch on the H200), or a judge or baseline out of memory beside a judge that grew
    to 116 GB: judged again alone, or said as too large for this GPU.

    A timing its supervisor's clock doubted beside other evaluations is judged again alone too: a
    host the scheduler kept waiting stretches the window the check bounds the calls with (two
    legitimate generations of a full-size batch on the H200 were called impossible so). Alone, an
    honest timing agrees with the clock and a forged one still does not; only the second counts."""
    started = started if started is not None else time.monotonic()
    judged = functools.partial(
        _judge_compiled, task, solution, compiled, options, sandbox=sandbox, baseline_cache=baseline_cache
    )
    result, shared = judged(started=started, whole_gpu=False)
    why = why_judge_again(result) if shared else None
    if why is not None:
        result, _ = judged(started=started, whole_gpu=True)
        result.reason += f" (judged again with the GPU to itself: {why})"
    return result


def why_judge_again(result: EvalResult) -> str | None:
    """Why a result got beside other evaluations is no answer yet, or None when it is one."""
    if out_of_memory(result) or referee_short_of_memory(result):
        return f"it ran out of GPU memory beside other evaluations: {result.reason[:200]}"
    errors = result.performance.baseline_errors if result.performance else {}
    short = next((f"{name}: {error}" for name, error in errors.items() if "OutOfMemoryError" in error), None)
    if short is not None:  # level-1 HuberLoss's eager baseline beside another judge's 14 GB
        return f"a baseline ran out of GPU memory beside other evaluations: {short[:200]}"
    if timing_in_doubt(result):
        flags = result.performance.flags if result.performance else []
        doubt = next((f.message for f in flags if f.code in TIMING_DOUBTS), result.reason)
        return f"its timing beside other evaluations was in doubt: {doubt[:200]}"
    return None


def out_of_memory(result: EvalResult) -> bool:
    """The candidate's run failed for want of GPU memory."""
    return result.verdict == "runtime_error" and result.failure is not None and result.failure.kind == "oom"


def referee_short_of_memory(result: EvalResult) -> bool:
    """The referee could not keep or take the outputs for want of room (`referee_capacity`), or
    its judge ran out of GPU memory (level-1 SDPA's inputs, beside a judge holding 116 GB)."""
    return (
        result.verdict == "referee_error"
        and result.failure is not None
        and (
            result.failure.kind == "referee_capacity"
            or (result.failure.kind == "oom" and result.failure.stage == "judge")
        )
    )


# Flags of a timing its supervisor's clock or the gaps after its calls cast doubt on.
TIMING_DOUBTS = frozenset({"timing_inconsistent", "other_streams_time"})


def timing_in_doubt(result: EvalResult) -> bool:
    """The candidate's timing disagreed with its supervisor's clock (a violation or a flag), or
    the time added to it for work left on other streams moved it past the noise floor (a host
    slow back from its syncs looks the same: 9 of 250 in a full batch got some, 3 past 2%)."""
    performance = result.performance
    if performance is None:
        return False
    if any(f.code == "timing_inconsistent" for f in performance.flags):
        return True
    timed = performance.candidate
    return timed.other_streams_ms > assemble.NOISE_FLOOR * max(timed.median_ms - timed.other_streams_ms, 0.0)


class _Stop(Exception):
    """Ends one judging early with its verdict; the stage that raises it filled in the result."""

    def __init__(self, verdict: Verdict, reason: str) -> None:
        super().__init__(reason)
        self.verdict: Verdict = verdict
        self.reason = reason


def _judge_compiled(
    task: Task,
    solution: Solution,
    compiled: CompileResult,
    options: EvalOptions | None,
    *,
    sandbox: Sandbox,
    baseline_cache: BaselineCache | None,
    started: float,
    whole_gpu: bool,
) -> tuple[EvalResult, bool]:
    """One judging; also whether the GPU's memory was shared with other evaluations meanwhile.

    Stages: the GPU share (gate and memory), the judge started, the candidate's run, the judge's,
    the conclusion. Each hands the next what it found, or stops the judging with a verdict. The
    total time is taken before the judge, the exchange folder and the memory claim are let go."""
    options = options or EvalOptions()
    result = _new_result(task, solution, compiled, options)
    shared = False
    with contextlib.ExitStack() as stack:
        try:
            if not compiled.ok:
                raise _Stop("compile_error", compiled.feedback().splitlines()[0])
            gpu = _judging_gpu(options.device)
            share = stack.enter_context(gpu_share(options, sandbox, task, whole_gpu=whole_gpu))
            shared, result.stage_times.memory_wait_s = share.shared, share.waited_s
            share.ensure_held()
            judging = Judging(
                task, solution, compiled, options, sandbox, gpu, share, Seeds.fresh(options.trials)
            )
            exchange = open_exchange(solution, sandbox)
            stack.callback(exchange.cleanup)
            judge = _start_judge(judging, exchange)
            stack.callback(judge.abandon)
            candidate = _candidate_stage(judging, exchange, judge, result)
            judged = _judge_stage(judging, exchange, judge, candidate, result, baseline_cache)
            verdict, reason = _conclude(result, judging, candidate, judged)
        except _Stop as stop:
            verdict, reason = stop.verdict, stop.reason
        result.verdict, result.reason = verdict, reason
        result.stage_times.total_s = time.monotonic() - started
        return result, shared


def _new_result(task: Task, solution: Solution, compiled: CompileResult, options: EvalOptions) -> EvalResult:
    """The result before any verdict: what was judged, and how."""
    return EvalResult(
        task=TaskRef.of(task),
        solution=SolutionRef(
            kind=solution.kind,
            content_hash=compiled.content_hash,
            path=str(solution.source if isinstance(solution, SingleFileSolution) else solution.entry),
        ),
        policy=options.policy,
        precision=options.precision,
        device_kind="cpu" if options.device == "cpu" else "cuda",
        verdict="referee_error",
        reason="",
        compile=compiled,
        stage_times=StageTimes(compile_s=compiled.duration_s),
    )


def _judging_gpu(device: str) -> DeviceInfo:
    """The GPU the judging runs on (the CPU when `device` is cpu); stops it when there is none."""
    gpu = host_gpu() if device != "cpu" else DeviceInfo(name="cpu", torch=_torch_version())
    if gpu is None:
        raise _Stop(
            "no_gpu",
            "compiled; verify and profile need a CUDA GPU and none is visible here "
            "(torch.cuda.is_available() is False)",
        )
    return gpu


@dataclass(frozen=True)
class GpuShare:
    """One evaluation's place on its GPU: the gate file (None: the caller keeps the GPU to itself)
    and its claim on the GPU's memory (None without a gate), which the judge takes over."""

    gate: str | None
    memory: gpu_memory.MemoryClaim | None

    @property
    def shared(self) -> bool:
        """Whether other evaluations may hold part of the GPU's memory meanwhile."""
        return self.memory is not None and self.memory.units < gpu_memory.UNITS

    @property
    def waited_s(self) -> float:
        return self.memory.waited_s if self.memory is not None else 0.0

    def ensure_held(self) -> None:
        """Stop the judging when the memory did not come in time."""
        memory = self.memory
        if memory is not None and not memory.held:
            raise _Stop(
                "referee_error",
                f"waited {memory.waited_s:.0f}s for {memory.units} of {gpu_memory.UNITS} parts of the "
                "GPU's memory (other evaluations held them): not the candidate's fault, evaluate it again",
            )

    def holders(self, sandbox: Sandbox) -> tuple[str | None, str | None]:
        """gate_holders for `sandbox`. Sandboxes show their processes the default gate folder only
        (a batch's --gpu-lock-dir elsewhere, under a private /tmp say, stays hidden): a gate outside
        it is held by the host."""
        sees = sandbox.capabilities.sees_gpu_gates and self.gate is not None and _in_gate_dir(self.gate)
        return gate_holders(self.gate, sees_gates=sees)


@contextlib.contextmanager
def gpu_share(options: EvalOptions, sandbox: Sandbox, task: Task, *, whole_gpu: bool) -> Iterator[GpuShare]:
    """The evaluation's gate and its memory, waited for (MEMORY_WAIT_S at most, the whole GPU's
    when `whole_gpu`); what the host still holds of the claim is given back on exit."""
    gate = _gate_file(options.gpu_gate, sandbox, options.device)
    memory = _claim_memory(gate, task, MEMORY_WAIT_S, whole_gpu=whole_gpu)
    try:
        yield GpuShare(gate, memory)
    finally:
        if memory is not None:
            memory.release()  # when the judge never started


@dataclass(frozen=True)
class Judging:
    """What every stage of one judging reads."""

    task: Task
    solution: Solution
    compiled: CompileResult
    options: EvalOptions
    sandbox: Sandbox
    gpu: DeviceInfo
    share: GpuShare
    seeds: Seeds

    @property
    def on_gpu(self) -> bool:
        return self.options.device.startswith("cuda")

    @property
    def tolerances(self) -> TolerancePolicy:
        return self.options.tolerances()

    @property
    def timing(self) -> TimingConfig:
        return self.options.timing or TimingConfig()


def _start_judge(judging: Judging, exchange: Exchange) -> JudgeProcess:
    """The judge, started before the candidate so that its `import torch` overlaps the candidate's
    run; it takes the candidate's GPU outputs on the exchange folder's socket, and the memory claim."""
    gate, memory = judging.share.gate, judging.share.memory
    handoff = gpu_handoff.listen(str(exchange.host_dir)) if judging.on_gpu else None
    judge = JudgeProcess(
        handoff=handoff,
        device=judging.options.device,
        memory_fds=memory.fds if memory else None,
        visible=[exchange.host_dir, *([Path(gate).parent] if gate else [])],
    )
    if memory is not None:
        memory.release()  # the judge holds the claim now, and gives it back as it frees memory
    return judge


@dataclass(frozen=True)
class CandidateOutcome:
    """The candidate stage's hand-off: its run and its complete record, whose rechecks are now the
    supervisor's (assemble.supervised_rechecks), and what the record got wrong about them."""

    run: CandidateRun
    record: CandidateRecord
    rechecks: list[SupervisedRecheck]
    problems: list[str]


def _candidate_stage(
    judging: Judging, exchange: Exchange, judge: JudgeProcess, result: EvalResult
) -> CandidateOutcome:
    """Run the candidate worker; stop the judging when its run cannot be judged."""
    inner_gate, outer_gate = judging.share.holders(judging.sandbox)
    run = _run_candidate(judging, exchange, inner_gate, outer_gate)
    result.stage_times.candidate_s = run.result.duration_s
    result.stage_times.candidate_stages = _stage_durations(run.record, run.result.duration_s)
    ungated = ungated_candidate(run.record, inner_gate)
    if ungated:
        judge.abandon()
        raise _Stop("referee_error", ungated)
    if run.record is None or not run.record.get("done"):
        judge.abandon()
        verdict, result.failure = candidate_failure(run, judging.options.run_timeout_s)
        raise _Stop(verdict, result.failure.message)
    rechecks, problems = assemble.supervised_rechecks(run.record)
    run.record["rechecks"] = rechecks
    seen = run.record.get("device") or {}
    result.device = judging.gpu.model_copy(
        update={"python": seen.get("python", ""), "allocator": str(seen.get("allocator", ""))}
    )
    return CandidateOutcome(run, run.record, rechecks, problems)


def _run_candidate(
    judging: Judging, exchange: Exchange, inner_gate: str | None, outer_gate: str | None
) -> CandidateRun:
    """The candidate worker's run; the host holds `outer_gate` around it (a gate its sandbox cannot
    see), and the GPU's gate a moment past a killed run."""
    spec = _candidate_spec(judging, exchange, inner_gate)
    # The arch and the folder load_inline built in at compile, so that it does not rebuild: a single
    # file's extensions, and a workspace's standalone modules (a whole model composed of regions).
    env = {"TORCH_CUDA_ARCH_LIST": judging.compiled.arch}
    if judging.compiled.build_dir:
        env["TORCH_EXTENSIONS_DIR"] = judging.compiled.build_dir
    with _exclusive(outer_gate):
        run = run_candidate(judging.sandbox, spec, exchange, timeout=judging.options.run_timeout_s, env=env)
    if judging.share.gate is not None and (run.result.timed_out or run.result.signal is not None):
        # A killed candidate's kernels can outlive its process, and so its hold on the gate,
        # until the driver tears its context down (seen on the H200: timings taken right
        # after an endless kernel was killed ran 16x slow): keep the GPU a moment longer.
        with _exclusive(judging.share.gate):
            time.sleep(GPU_TEARDOWN_GRACE_S)
    return run


@dataclass(frozen=True)
class JudgeOutcome:
    """The judge stage's hand-off: the judge's result and the baselines, resolved from it or the cache."""

    result: JudgeResult
    baselines: Baselines


def _judge_stage(
    judging: Judging,
    exchange: Exchange,
    judge: JudgeProcess,
    candidate: CandidateOutcome,
    result: EvalResult,
    baseline_cache: BaselineCache | None,
) -> JudgeOutcome:
    """Give the judge its spec now that the candidate exited; stop the judging when it failed."""
    baselines = _plan_baselines(judging, baseline_cache)
    spec: JudgeSpec = _judge_spec(judging, exchange, candidate)
    if judging.options.profile:
        spec = {**spec, **baselines.request(measure_bandwidth=judging.options.device != "cpu")}
    judged, execution = judge.run(spec, timeout=judging.options.judge_timeout_s)
    result.stage_times.judge_s = execution.duration_s
    result.stage_times.judge_stages = _judge_stages(judged, execution.duration_s)
    if judged is None or not judged.get("ok"):
        result.failure = _judge_failure(judged, execution)
        raise _Stop("referee_error", result.failure.message)
    baselines.resolve(judged)
    result.inputs_built_on = judged.get("inputs_built_on", "")
    return JudgeOutcome(judged, baselines)


def _plan_baselines(judging: Judging, cache: BaselineCache | None) -> Baselines:
    task, gpu, options = judging.task, judging.gpu, judging.options
    return Baselines.plan(
        cache or BaselineCache(),
        task_sha256=task.sha256,
        input_spec=task.spec.model_dump_json() if task.spec else "",
        gpu=gpu.name,
        torch=gpu.torch,
        compile_mode=options.baseline_compile_mode(),
        timing=json.dumps({**judging.timing.to_dict(), "version": TIMING_VERSION}, sort_keys=True),
        refresh=options.refresh_baselines,
        configured_bandwidth=options.bandwidth_gbps,
        precision=options.precision,
    )


def _judge_failure(judged: JudgeResult | None, execution: ExecResult) -> FailureReport:
    """Why the judge gave no result: its own account of the failure, else how its process ended."""
    failure = (judged or {}).get("failure") or {}
    why = failure.get("message") or execution.describe_failure() or "it wrote no result"
    return FailureReport(
        stage="judge",
        kind=failure.get("kind", "judge_failed"),
        message=f"the referee's judge failed: {why}",
        detail=failure.get("traceback") or stderr_tail(execution.stderr),
        returncode=execution.returncode,
    )


def _conclude(
    result: EvalResult, judging: Judging, candidate: CandidateOutcome, judged: JudgeOutcome
) -> tuple[Verdict, str]:
    """The verdict from both processes' accounts, with the reports it rests on filled in."""
    record, seen = candidate.record, judged.result
    if seen.get("state_checksum") != record.get("state_checksum"):
        return (
            "referee_error",
            "the task's Model is not rebuilt identically from a seed: its state differs between processes",
        )
    if not seen.get("inputs_reproducible", True):
        return (
            "referee_error",
            "the task's get_inputs() is not reproducible from a seed (randomness torch does not seed)",
        )
    correctness = assemble.correctness_report(record, seen, judging.tolerances, judging.options.trials)
    result.correctness = correctness
    if "precision" in seen:
        result.precision_check = PrecisionReport.model_validate(seen["precision"])
    policy = _policy_report(result.policy, candidate, seen)
    result.policy_report = policy
    result.performance = _performance_report(result.policy, judging.solution, candidate, judged)
    tampered = assemble.timing_tampered(result.performance.timing_check if result.performance else None)
    policy.violations += candidate.problems + ([tampered] if tampered else [])
    if not correctness.passed:
        return "incorrect", _lower_precision(result.precision_check) or assemble.first_problem(correctness)
    if result.precision_check is not None and not result.precision_check.ok:
        return "incorrect", result.precision_check.line
    shortfall = assemble.poison_shortfall(record)
    if shortfall:
        return "referee_error", shortfall
    if policy.violations:
        return "policy_violation", policy.violations[0]
    return "correct", assemble.correct_reason(correctness, result.performance) + _precision_words(result)


def _policy_report(policy: str, candidate: CandidateOutcome, judged: JudgeResult) -> PolicyReport:
    report = assemble.policy_report(policy, candidate.record, forged_notes=candidate.run.notes)
    tampered = assemble.tampered_inputs(candidate.record, judged)
    if tampered:
        report.violations.insert(
            0,
            f"the inputs generated in the candidate process differ from the seeded inputs (trials {tampered}): "
            "something in the candidate changed how inputs are made",
        )
    return report


def _performance_report(
    policy: str, solution: Solution, candidate: CandidateOutcome, judged: JudgeOutcome
) -> PerformanceReport | None:
    first = (judged.result.get("trials") or [{}])[0]
    moved = (first.get("input_bytes") or 0) + (first.get("output_bytes") or 0)
    baselines = judged.baselines
    return assemble.performance_report(
        candidate.record,
        eager=baselines.stats.get("eager"),
        compiled=baselines.stats.get("compile"),
        compile_mode=baselines.compile_mode,
        baseline_errors=baselines.errors,
        own_kernels=own_kernel_names(solution_sources(solution)),
        bytes_moved=moved or None,
        bandwidth_gbps=baselines.bandwidth,
        bandwidth_source=baselines.bandwidth_source,
        policy=policy,
    )


def _lower_precision(check: PrecisionReport | None) -> str | None:
    """Why outputs outside the tolerance are, where their error is that of a known lower precision
    (TF32, FP16, BF16 accumulation) than the policy allows; an error past every rung is a bug, and
    the first wrong output says more."""
    if check is None or check.ok or check.measured not in PRECISIONS[1:]:
        return None
    return check.line


def _precision_words(result: EvalResult) -> str:
    """The precision the speedups are stated at, where it is not plain FP32."""
    check = result.precision_check
    if check is None or (check.policy == "fp32" and check.baseline_precision == "fp32"):
        return ""
    return f"; precision {check.policy}: baselines at {check.baseline_precision.upper()}"


def _stage_durations(record: CandidateRecord | None, total_s: float) -> dict[str, float]:
    stages = ((record or {}).get("supervisor") or {}).get("stages") or []
    durations: dict[str, float] = {}
    for index, (name, at) in enumerate(stages):
        until = stages[index + 1][1] if index + 1 < len(stages) else total_s
        durations[str(name)] = durations.get(str(name), 0.0) + max(0.0, float(until) - float(at))
    return durations


def _judge_stages(judged: JudgeResult | None, duration_s: float) -> dict[str, float]:
    """The judge's stages by its own clock, and `exiting`: from its result line to its exit as the
    host waited for it (the process's teardown, freeing its GPU memory)."""
    stages = (judged or {}).get("stages")
    if not isinstance(stages, dict):
        return {}
    seconds = {str(name): float(s) for name, s in stages.items() if isinstance(s, int | float) and s >= 0}
    until_result = (judged or {}).get("spec_to_result_s")
    if isinstance(until_result, int | float) and 0 <= until_result <= duration_s:
        seconds["exiting"] = duration_s - float(until_result)
    return seconds


def _gate_file(option: GateOption, sandbox: Sandbox, device: str) -> str | None:
    """The gate file's path for this evaluation's GPU, created so a read-only view can lock it."""
    if option is None or not device.startswith("cuda"):
        return None
    if option != "auto":
        path = Path(option)
    else:
        gpus = sandbox.capabilities.pinned_gpus  # the machine's ids: when just one, that GPU's gate
        if gpus is not None and len(gpus) == 1:
            path = Path(physical_gate_path(gpu_gate_dir(), gpus[0]))
        else:
            path = Path(gate_path(gpu_gate_dir(), "0"))
    path.parent.mkdir(parents=True, exist_ok=True)
    for name in gate_files(str(path)):
        Path(name).touch(exist_ok=True)
    return str(path)


def _claim_memory(
    gate: str | None, task: Task, timeout: float, *, whole_gpu: bool = False
) -> gpu_memory.MemoryClaim | None:
    """This evaluation's share of the GPU's memory (gpu_memory), or all of it, waited for; None
    without a gate (the caller keeps the GPU to itself)."""
    if gate is None:
        return None
    budget = int(GPU_MEMORY_BUDGET * gpu_memory_bytes())
    units = gpu_memory.UNITS if whole_gpu else gpu_memory.units_for(memory_need(task), budget)
    claim = gpu_memory.MemoryClaim(gate, units)
    claim.acquire(timeout)
    return claim


def memory_need(task: Task) -> int:
    """A generous guess of an evaluation's peak GPU memory from the task's spec, for I bytes of
    inputs and O of outputs (as large as the inputs where forward could not run on meta): the
    candidate's inputs, pristine copy, poisoned reserve and output snapshots (4I + 2O) beside the
    seven outputs it hands to the judge (7O), the model's state three times, the two CUDA contexts
    and the judge's compare chunks. A full-size level-1 ReLU: 87 GB measured on the H200, 86 here."""
    if task.spec is None:
        return CONTEXTS_BYTES
    inputs = sum(arg.nbytes for arg in task.spec.inputs)
    outputs = inputs if task.spec.outputs is None else sum(arg.nbytes for arg in task.spec.outputs)
    state = 4 * (task.spec.parameters + task.spec.buffers)
    return 4 * inputs + 9 * outputs + 3 * state + CONTEXTS_BYTES


@functools.cache
def gpu_memory_bytes() -> int:
    props = first_device()
    return props.total_memory if props else 0


def _in_gate_dir(gate: str) -> bool:
    return Path(gate).resolve().parent == gpu_gate_dir().resolve()


def ungated_candidate(record: CandidateRecord | None, inner_gate: str | None) -> str | None:
    """Why the candidate's run cannot stand when its supervisor was to take the GPU gate and could
    not open it: its trials and timings ran beside other evaluations' timed sections, which that
    slows (a baseline timed beside them makes every candidate look faster). None when it could."""
    if inner_gate is None or record is None:
        return None
    if ((record.get("supervisor") or {}).get("gate")) != "unavailable":
        return None
    return (
        f"the candidate's sandbox could not open the GPU gate {inner_gate}, so its GPU work was not kept "
        "apart from other evaluations' timings: not the candidate's fault; make the gate folder visible "
        "to the sandbox (the default gate folder always is) and evaluate it again"
    )


def gate_holders(gate: str | None, *, sees_gates: bool) -> tuple[str | None, str | None]:
    """(the gate the candidate's supervisor takes, the gate the host holds exclusively around the
    candidate run). The local sandbox shows its processes the gate folder and docker mounts it;
    where a sandbox cannot, the host keeps the GPU to the candidate for its whole run: slower to
    share, never timed alongside other work."""
    if gate is None:
        return None, None
    return (gate, None) if sees_gates else (None, gate)


@contextlib.contextmanager
def _exclusive(path: str | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with GpuGate(path) as gate:
        gate.hold("exclusive")
        yield


def _referee_task(judging: Judging) -> RefereeTask:
    seeds = judging.seeds
    return {
        "device": judging.options.device,
        "task_source": judging.task.source,
        "task_filename": str(judging.task.path),
        "init_seed": seeds.init,
        "state_seed": seeds.state,
        "trial_seeds": seeds.trials,
        "hidden_probe_seed": seeds.probe if judging.options.hidden_inputs else None,
    }


def _candidate_spec(judging: Judging, exchange: Exchange, inner_gate: str | None) -> CandidateSpec:
    options = judging.options
    return {
        **_referee_task(judging),
        "solution": _solution_spec(judging.solution, judging.compiled, judging.sandbox),
        "exchange_dir": exchange.box_dir,
        "handoff_socket": f"{exchange.box_dir}/{gpu_handoff.SOCKET_NAME}" if judging.on_gpu else None,
        "policy": options.policy,
        "profile": options.profile,
        "timing": judging.timing.to_dict(),
        "rechecks": RECHECKS,
        "profile_calls": PROFILE_CALLS,
        "gpu_gate": inner_gate,
    }


def _judge_spec(judging: Judging, exchange: Exchange, candidate: CandidateOutcome) -> JudgeSpec:
    return {
        **_referee_task(judging),
        "exchange_dir": str(exchange.host_dir),
        "trials": [{"index": t["index"], "file": t["file"]} for t in candidate.record.get("trials", [])],
        "rechecks": [{"index": r["index"], "seed": r["seed"], "file": r["file"]} for r in candidate.rechecks],
        "tolerances": judging.tolerances.for_worker(),
        "timing": judging.timing.to_dict(),
        "gpu_gate": judging.share.gate,
        "precision": judging.options.precision,
    }


def _solution_spec(solution: Solution, compiled: CompileResult, sandbox: Sandbox) -> SolutionSpec:
    entry = f"{sandbox.workspace_path}/{solution.entry.relative_to(solution.root).as_posix()}"
    if isinstance(solution, Workspace):
        return {
            "kind": "workspace",
            "extension": EXTENSION_NAME,
            "module_path": compiled.module_path,
            "entry": entry,
            "module_name": Path(MODEL_ENTRY).stem,
        }
    return {
        "kind": "single_file",
        "build_dir": compiled.build_dir,
        "cache_dir": sandbox.cache_path,
        "entry": entry,
        "module_name": "kernel_agent_solution",
    }


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "unknown"

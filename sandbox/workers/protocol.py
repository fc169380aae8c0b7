"""The referee's trust boundary: every JSON document between the host and the workers (stdlib only).

Who writes what:

- the host (agent/, trusted) writes the requests and specs: the build spec, the candidate and judge
  specs, the tuning specs, requests and items;
- the workers in the sandbox write what comes back, and none of it is trusted: the build result
  (build.py compiles model-written code), the candidate's completion record (candidate_child.py
  runs candidate code; its supervisor candidate.py, which runs none, adds what it saw and signs
  it), the tuning worker's mailbox files (tune_worker.py runs candidate code);
- the judges (judge.py, tune_judge.py) are trusted host processes that never import candidate
  code; the task inspector (inspect_task.py) is a host process that runs task files, each in a
  forked child.

These types describe the wire format on both sides, so that pyright reports a misspelled key in
a literal, a subscript or an assignment (not in `.get()`, whose key it does not check). They check
nothing at run time. What an untrusted worker sends is checked where the host reads it:

- the completion record: its HMAC and run id (agent/referee/processes.py `read_record`); the
  supervisor drops child messages that are not JSON objects (candidate.py `converse`);
- the timed calls to recheck and their seeds come from the supervisor's window, never the child's
  claims, and the child's timing is parsed by `TimingStats` and held against the supervisor's
  clock (agent/referee/assemble.py `supervised_rechecks`, `performance_report`, `timing_check`);
- correctness only ever comes from a judge's own comparison, of output files it reads with
  `torch.load(weights_only=True)` and checks the structure of (judge.py, tune_judge.py);
- the build result: only `ok` and `mode` are taken, the log is parsed as text
  (agent/build/compile.py); the task inspector's specs go through pydantic (`InputSpec`,
  agent/tasks.py); a tuning worker's numbers through `Measurement`, and its inputs must match
  the judge's (`check_inputs_match`, agent/tune/session.py).

A worker prints exactly one line `RESULT_MARKER + json` on its real stdout, last. Everything
user or candidate code prints is diverted to stderr while it runs, so it cannot be mistaken
for the result; the host takes the last marker line and treats its absence as a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

RESULT_MARKER = "@@KERNEL_AGENT_RESULT@@ "


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send fd 1 to fd 2 (Python prints and C printf alike) for the duration."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def emit(result: Mapping[str, object], fd: int | None = None) -> None:
    line = RESULT_MARKER + json.dumps(result, default=str) + "\n"
    if fd is None:
        sys.stdout.write(line)
        sys.stdout.flush()
    else:
        os.write(fd, line.encode())


def parse(stdout: str) -> dict[str, Any] | None:
    """The last result record in `stdout`, or None when the worker never wrote one."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                value = json.loads(line[len(RESULT_MARKER) :])
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


SEED_MASK = (1 << 62) - 1


def derive_seed(base: int, index: int) -> int:
    """The seed of timed call `index` from the window's base seed (candidate, host and judge alike)."""
    return ((base ^ (index * 0x9E3779B97F4A7C15)) * 0xBF58476D1CE4E5B9 + index) & SEED_MASK


# == shared pieces ================================================================================


class SeededTask(TypedDict):
    """A task's source and the seeds its Model and inputs are rebuilt from (fresh per evaluation)."""

    device: str
    task_source: str
    task_filename: str
    init_seed: int
    state_seed: int


class RefereeTask(SeededTask):
    """The candidate's and the judge's task: one input seed per correctness trial."""

    trial_seeds: list[int]
    # the seed of the probe input each side checks the hidden transforms' domain on
    # (referee_common.hidden_allowed); absent or None: every trial uses the task's own inputs
    hidden_probe_seed: NotRequired[int | None]


Tolerances = dict[str, list[float]]
"""[atol, rtol, norm_rtol] per dtype name, plus "int" and "default" (TolerancePolicy.for_worker)."""


class TimingSettings(TypedDict, total=False):
    """timing.TimingConfig as JSON (its to_dict / from_dict); a missing key takes the default."""

    warmup_ms: float
    min_warmup: int
    target_ms: float
    min_reps: int
    max_reps: int
    max_seconds: float
    blocking_sync: bool


class TimingRecord(TypedDict):
    """What timing.time_calls measured (timing.summarize); agent.referee.results.TimingStats reads it."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    mean_ms: float
    std_ms: float
    cv: float
    min_ms: float
    max_ms: float
    n: int
    warmup: int
    method: str
    l2_flush: bool
    host_median_ms: float
    window_ms: float | None
    held_outputs: bool
    persisting_l2_reset: bool
    sync_gap_ms: float | None
    reference_gap_ms: float | None
    other_streams_ms: float
    version: int


class WorkerFailure(TypedDict):
    """Why a referee worker stopped: where, what kind (exception, oom, cuda_error, ...), the text."""

    stage: str
    kind: str
    message: str
    traceback: str


class WorkerDevice(TypedDict):
    """The device a referee worker ran on, as that process saw it."""

    device: str
    torch: str
    python: str
    name: NotRequired[str]
    capability: NotRequired[str]
    allocator: NotRequired[str]  # the candidate's CUDA allocator and its settings (on a GPU)


class LeafDescription(TypedDict):
    """One output leaf, described without calling into it (referee_common.describe_leaf)."""

    type: str
    exact_tensor: bool
    shape: NotRequired[list[int]]
    dtype: NotRequired[str]
    device: NotRequired[str]


class DiffRecord(TypedDict):
    """How one output leaf compares with the expected one (compare.py); keys beyond `passed` and
    `problems` depend on the leaf (tensor or value) and on how far the comparison got."""

    passed: bool
    problems: list[str]
    shape_expected: NotRequired[list[int]]
    shape_actual: NotRequired[list[int]]
    dtype_expected: NotRequired[str]
    dtype_actual: NotRequired[str]
    numel: NotRequired[int]
    atol: NotRequired[float]
    rtol: NotRequired[float]
    norm_rtol: NotRequired[float]
    max_abs_err: NotRequired[float]
    max_rel_err: NotRequired[float]
    norm_rel_err: NotRequired[float | None]
    mismatch_count: NotRequired[int]
    mismatch_fraction: NotRequired[float]
    expected_nan: NotRequired[int]
    actual_nan: NotRequired[int]
    expected_inf: NotRequired[int]
    actual_inf: NotRequired[int]
    nonfinite_mismatches: NotRequired[int]
    worst_index: NotRequired[list[int]]
    worst_expected: NotRequired[float]
    worst_actual: NotRequired[float]
    error_ratio: NotRequired[float]
    norm_ratio: NotRequired[float | None]
    first_wrong_index: NotRequired[list[int]]
    mismatch_pattern: NotRequired[str]
    pattern_detail: NotRequired[str]
    value_expected: NotRequired[str]
    value_actual: NotRequired[str]


class ExtensionSolutionSpec(TypedDict):
    """A workspace solution: its built extension (None without sources) and model_new.py."""

    extension: str
    module_path: str | None
    entry: str
    module_name: str


class WorkspaceSolutionSpec(ExtensionSolutionSpec):
    """The candidate worker's workspace solution."""

    kind: Literal["workspace"]


class SingleFileSolutionSpec(TypedDict):
    """A KernelBench single-file solution: load_inline builds into `build_dir` on import."""

    kind: Literal["single_file"]
    build_dir: str
    cache_dir: str
    entry: str
    module_name: str


SolutionSpec = WorkspaceSolutionSpec | SingleFileSolutionSpec


# == build: agent/build/compile.py -> build.py ====================================================


class WorkspaceBuildSpec(TypedDict):
    """build.py's argv[1] for a workspace. `config_hash` is the hash of everything else and the
    arch (build.ninja is reused while it matches); the worker adds cuBLAS/cuDNN flags when
    `link_vendor_libraries` is set."""

    kind: Literal["workspace"]
    name: str
    sources: list[str]
    build_dir: str
    cache_dir: str
    cflags: list[str]
    cuda_cflags: list[str]
    link_vendor_libraries: NotRequired[bool]
    ldflags: NotRequired[list[str]]
    include_dirs: NotRequired[list[str]]
    entry: NotRequired[str]  # model_new.py: imported after the build (load_check.py)
    reference: NotRequired[str]  # reference.py: its Model's state_dict is what ModelNew's must match
    config_hash: str
    content_hash: str


class SingleFileBuildSpec(TypedDict):
    """build.py's argv[1] for a single-file solution (imported once so load_inline builds)."""

    kind: Literal["single_file"]
    solution: str
    build_dir: str
    cache_dir: str
    config_hash: str
    content_hash: str


BuildSpec = WorkspaceBuildSpec | SingleFileBuildSpec


class BuildOutcome(TypedDict):
    """What one build did: mode up_to_date | ninja (incremental) | configure (full)."""

    ok: bool
    log: str
    mode: str
    module: str | None
    pch: NotRequired[bool]  # whether the precompiled torch header was usable (configure only)
    phases: NotRequired[dict[str, float]]  # single files: import_torch_s, solution_s (its load_inline)
    notes: NotRequired[list[str]]  # load check steps that could not run here (workspace)


class BuildResult(BuildOutcome):
    """build.py's result line."""

    duration_s: float
    niceness: int


class BuiltStamp(TypedDict):
    """The host's stamp of the last good build, in the sandbox's build cache (so a sandbox can
    write it too: a forged one can only make the host skip a build)."""

    content_hash: str
    config_hash: str


# == inspect task: agent/tasks.py -> inspect_task.py (argv: --timeout S TASK.py ...) ===============


class ArgDescription(TypedDict):
    """One value of get_inputs() or get_init_inputs(): shape and dtype, never values of tensors."""

    kind: str  # tensor | int | float | bool | none | list | tuple | other
    shape: NotRequired[list[int]]
    dtype: NotRequired[str]
    device: NotRequired[str]
    value: NotRequired[str]
    items: NotRequired[list[ArgDescription]]


class TaskProblem(TypedDict):
    """Why a task file could not be used, and at which step."""

    stage: str  # import | get_init_inputs | get_inputs | Model | timeout | crash
    message: str


class TaskInspected(TypedDict):
    """A task that ran: its input specs and the size of its Model's state."""

    path: str
    ok: Literal[True]
    inputs: list[ArgDescription]
    init_inputs: list[ArgDescription]
    parameters: int
    buffers: int
    built_on: NotRequired[str]  # "meta" (nothing allocated), or "cpu (on meta: WHY)"
    outputs: NotRequired[list[ArgDescription] | None]  # forward's result on meta; None if it cannot run there


class TaskFailed(TypedDict):
    """A task that did not run."""

    path: str
    ok: Literal[False]
    error: TaskProblem


TaskReport = TaskInspected | TaskFailed


class InspectResult(TypedDict):
    """inspect_task.py's result line: one report per task file, in argv order."""

    tasks: list[TaskReport]


# == candidate: agent/referee -> candidate.py (supervisor) <-> candidate_child.py ==================


class CandidateSpec(RefereeTask):
    """What the referee asks of the candidate worker."""

    solution: SolutionSpec
    exchange_dir: str  # inside the sandbox: the output files and the completion record
    handoff_socket: NotRequired[str | None]  # inside the sandbox: where the judge takes GPU outputs
    policy: str
    profile: bool
    timing: TimingSettings
    rechecks: int  # timed calls whose outputs the judge rechecks
    profile_calls: int
    gpu_gate: str | None  # the gate file the supervisor takes itself (None: the host holds it)


class CandidateRequest(CandidateSpec):
    """candidate.py's stdin. The supervisor pops `key` (it signs the record with it) and sends
    the rest to the child as its first line."""

    run_id: str
    key: NotRequired[str]


class ChildMessage(TypedDict, total=False):
    """A line from the child to its supervisor: op stage (name), shared, exclusive, exclusive_done,
    window_open (reps, hold), window_close (reps), result (body). Untrusted: read with .get."""

    op: str
    name: str
    reps: int
    hold: bool
    body: CandidateRecord


class SupervisorAnswer(TypedDict, total=False):
    """The supervisor's answer: ok, the window's seed and picks (picks None while the outputs are
    held), the picks when the window closes, or an error."""

    ok: bool
    seed: int
    picks: list[int] | None
    error: str


class TrialRecord(TypedDict):
    """One correctness trial as the child saw it; the outputs themselves are in `file`."""

    index: int
    file: str
    call_ms: float
    poisoned_bytes: int
    poison_needed_bytes: int
    structure: str
    leaves: list[LeafDescription]
    input_checksums: list[str]
    input_checksums_after: list[str]
    mutated_inputs: list[int]
    changed_after_return: list[int]
    aliases: list[tuple[int, int]]  # (output leaf, input) pairs sharing memory


class RecheckRecord(TypedDict):
    """A timed call's outputs the child saved because the supervisor named the call."""

    index: int
    file: str
    structure: str
    leaves: list[LeafDescription]


class SupervisedRecheck(RecheckRecord):
    """A recheck as the host plans it (assemble.supervised_rechecks): index and seed from the
    supervisor's window; file and leaves from the child's claim, when it made one."""

    seed: int


class TimingWindow(TypedDict):
    """The supervisor's own view of the timed loop; window_ms and reps_run once it closed."""

    reps_planned: int
    seed: int  # base of every timed call's input seed (derive_seed)
    held_outputs: bool
    rechecks: int
    picks: list[int]
    picks_known_in_advance: bool
    window_ms: NotRequired[float]
    reps_run: NotRequired[int]


class SupervisorView(TypedDict):
    """What the supervisor saw itself, added to the record it signs."""

    gate: str  # none requested | held | unavailable
    gate_wait_s: float
    stages: list[tuple[str, float]]  # (stage name, seconds since the supervisor started)
    window: TimingWindow | None


class StateLoad(TypedDict):
    """What ModelNew.load_state_dict(reference state, strict=False) reported."""

    missing: list[str]
    unexpected: list[str]


class ThreadReport(TypedDict):
    """Python threads the candidate started and left running."""

    python_new: list[str]


KernelRow = tuple[str, int, float]
"""(kernel name, launches, total device microseconds) over the profiled calls."""


class CandidateRecord(TypedDict):
    """The completion record: the child's observations (untrusted), which its supervisor signs
    with `supervisor` added. The keys after `trials` appear as the run gets that far."""

    run_id: str
    done: bool
    failure: WorkerFailure | None
    trials: list[TrialRecord]
    stage: NotRequired[str]  # the last stage the child announced
    supervisor: NotRequired[SupervisorView]
    device: NotRequired[WorkerDevice]
    state_checksum: NotRequired[str]
    state_load: NotRequired[StateLoad]
    ops: NotRequired[dict[str, int]]  # torch operators the dispatch mode saw in the trials
    profiler_ops: NotRequired[dict[str, int]]  # and the profiler's operator log of them
    captured_ops: NotRequired[dict[str, int]]  # of those, run under a CUDA graph capture
    setup_captured_ops: NotRequired[dict[str, int]]  # captured while ModelNew was built and loaded
    identity_changed: NotRequired[list[str]]
    timing: NotRequired[TimingRecord]
    rechecks: NotRequired[Sequence[RecheckRecord]]  # the host replaces them with SupervisedRechecks
    kernels: NotRequired[list[KernelRow] | None]
    profile_error: NotRequired[str | None]
    profiled_calls: NotRequired[int]
    profile_ops: NotRequired[dict[str, int]]
    graph_launches: NotRequired[float]  # CUDA graph launches per profiled forward call
    flags_changed: NotRequired[dict[str, tuple[str, str | None]]]  # flag: (before, after)
    threads: NotRequired[ThreadReport]
    handoff: NotRequired[HandoffReport]


class SignedRecord(TypedDict):
    """<exchange_dir>/result.json: the record as JSON text and its HMAC-SHA256 under the run's key."""

    body: str
    mac: str


# == judge: agent/referee -> judge.py (a trusted host process) =====================================


class TrialFile(TypedDict):
    """A trial the judge compares: its index (and so its seed) and the candidate's output file."""

    index: int
    file: str


class RecheckFile(TypedDict):
    """A timed call the judge rechecks: the supervisor's index and seed, the child's output file."""

    index: int
    seed: int
    file: str


class BaselineRequest(TypedDict):
    """Which baselines to time (those not cached); compile_mode None: no torch.compile arm."""

    eager: bool
    compile_mode: str | None


class BaselinePart(TypedDict):
    """The judge spec's baseline keys (agent.referee.baselines.Baselines.request)."""

    baselines: BaselineRequest
    measure_bandwidth: bool


class JudgeSpec(RefereeTask):
    """judge.py's stdin line, sent only after the candidate's process exited."""

    exchange_dir: str  # on the host: the candidate's output files
    trials: list[TrialFile]
    rechecks: list[RecheckFile]
    tolerances: Tolerances
    timing: TimingSettings
    gpu_gate: str | None
    baselines: NotRequired[BaselineRequest]
    measure_bandwidth: NotRequired[bool]
    precision: NotRequired[str]  # the policy (fp32, tf32, fp16, bf16, match); absent: fp32


class ReferenceOutputs(TypedDict):
    """The judge's expected outputs for one set of inputs, and the candidate's compared to them."""

    structure: str
    leaves: list[LeafDescription]
    reference_mutates_inputs: bool
    reference_aliases_inputs: bool
    input_bytes: int
    output_bytes: int
    diffs: list[DiffRecord]


class JudgedTrial(ReferenceOutputs):
    """One trial as the judge saw it."""

    index: int
    input_checksums: list[str]  # of the inputs the judge made from the trial's seed
    inputs: NotRequired[str]  # the hidden transform the seed drew ("task": the task's own values)


class JudgedRecheck(ReferenceOutputs):
    """One rechecked timed call as the judge saw it."""

    index: int
    seed: int


class BaselineError(TypedDict):
    """A baseline arm that could not be timed (torch.compile failed, say)."""

    error: str


class JudgeBaselines(TypedDict, total=False):
    """The baselines the judge timed, by arm (only those asked for)."""

    eager: TimingRecord | BaselineError
    compile: TimingRecord | BaselineError


class PrecisionRecord(TypedDict):
    """The judge's effective-precision check (precision.py) of the candidate's first trial: its
    error against a float64 reference placed on eager's ladder, and the policy's answer."""

    policy: str
    measured: str | None  # fp32, tf32, fp16, bf16, below_bf16; None: not measured (see `note`)
    words: str  # the measured class in words ("TF32 or FP16")
    error: float | None  # the candidate's relative error against float64 (worst output)
    ladder: dict[str, float]  # eager's error per class, e.g. {"fp32": 3e-8, "tf32/fp16": 4e-4}
    ok: bool
    line: str  # the classifier's line: why it passed or was rejected
    baseline_precision: str  # the precision the baselines are timed at
    sampled: bool  # the error was taken over a sample of output elements
    note: str  # why the precision was not measured, when it was not


class HandoffReport(TypedDict):
    """How the child's outputs reached the judge: how many on the GPU (gpu_handoff), and why the
    others went to files, when they did."""

    gpu_outputs: int
    problem: str


class JudgeResult(TypedDict):
    """judge.py's result line; the keys after `failure` appear as the judge gets that far."""

    ok: bool
    failure: WorkerFailure | None
    device: NotRequired[WorkerDevice]
    state_checksum: NotRequired[str]
    trials: NotRequired[list[JudgedTrial]]
    inputs_reproducible: NotRequired[bool]
    inputs_built_on: NotRequired[str]  # "cuda", or "cpu" when get_inputs() makes them there (moved)
    hidden_transforms: NotRequired[list[str]]  # what the trials could draw (referee_common.hidden_allowed)
    rechecks: NotRequired[list[JudgedRecheck]]
    baselines: NotRequired[JudgeBaselines]  # empty when a check failed: nothing worth timing
    bandwidth_gbps: NotRequired[float | None]
    handoff_notes: NotRequired[list[str]]  # malformed or refused GPU hand-offs from the candidate
    precision: NotRequired[PrecisionRecord]
    baseline_precision: NotRequired[str]  # what the baselines were timed at (fp32, tf32, fp16, bf16)
    stages: dict[str, float]  # seconds per stage of the judge, by its own clock
    spec_to_result_s: NotRequired[float]  # from reading its spec to writing this line


# == tune: agent/tune -> tune_judge.py (trusted, JSON lines over pipes) and tune_worker.py =========
# (untrusted, in the sandbox; a mailbox folder: req_<n>.json in, res_<n>.jsonl out)


class TuneSeeds(TypedDict):
    """Fresh seeds of one tuning run (agent.tune.session.fresh_seeds)."""

    init_seed: int
    state_seed: int
    input_seed: int


class TuneTask(SeededTask):
    """Tuning times every configuration on the same inputs: one input seed."""

    input_seed: int


class TuneJudgeSpec(TuneTask):
    """tune_judge.py's first stdin line."""

    tolerances: Tolerances


class TaskFeatures(TypedDict):
    """What the reference ran: the experience library's features of the task."""

    ops: list[str]  # aten operators the reference ran
    modules: list[str]


class TuneJudgeReady(TypedDict, total=False):
    """tune_judge.py's first line: the reference is computed (ready), or why not (message)."""

    ready: bool
    device: str
    state_checksum: str
    input_checksums: list[str]
    structure: str
    outputs: list[LeafDescription]
    features: TaskFeatures
    message: str
    traceback: str


class VerifyRequest(TypedDict):
    """Compare the outputs in `file` (deleted once read) with the reference."""

    op: Literal["verify"]
    id: int
    file: str


class KnownRequest(TypedDict):
    """The verdict already given for outputs with these bits, if any."""

    op: Literal["known"]
    id: int
    fingerprint: str


class StopJudgeRequest(TypedDict):
    """The judge's last line: it exits."""

    op: Literal["stop"]


TuneJudgeRequest = VerifyRequest | KnownRequest | StopJudgeRequest
"""A line to tune_judge.py after its spec."""


class TuneVerdict(TypedDict):
    """The judge's verdict on one output, cached by the fingerprint of its bits."""

    passed: bool
    problem: str
    fingerprint: NotRequired[str]
    cached: NotRequired[bool]


class TuneJudgeAnswer(TypedDict, total=False):
    """tune_judge.py's answer to one request: a verdict, whether bits are known, or an error."""

    id: int | None
    passed: bool
    problem: str
    fingerprint: str
    cached: bool
    known: bool
    error: str


class TuneWorkerSpec(TuneTask):
    """The tuning worker's spec, the same for every generation of the worker."""

    mode: Literal["runtime", "define"]
    params: list[str]
    box_base: str
    item_timeout: float
    solution: ExtensionSolutionSpec
    idle_timeout: NotRequired[float]


class TuneWorkerStart(TuneWorkerSpec):
    """tune_worker.py's stdin: the spec and this generation's own mailbox folder."""

    exchange_dir: str


class TuneWorkerReady(TypedDict, total=False):
    """<mailbox>/ready.json, once the candidate is imported."""

    ready: bool
    device: str
    input_checksums: list[str]


class TuneWorkerFailed(TypedDict):
    """<mailbox>/failed.json, when the worker could not start."""

    message: str
    traceback: str


class TuneHang(TypedDict):
    """<mailbox>/hang.json, written by the watchdog before it ends the process."""

    key: str


class TuneItem(TypedDict):
    """One configuration to measure: its key, its values, its .so in define mode (else None);
    `full`: send the whole output to the judge, not just its fingerprint."""

    key: str
    values: dict[str, int]
    module: str | None
    full: NotRequired[bool]


class MeasureRequest(TypedDict):
    """Measure each item: one verified call, then the timing procedure."""

    op: Literal["measure"]
    items: list[TuneItem]
    timing: TimingSettings


class RetimeRequest(TypedDict):
    """Rounds of one timing per item, the order rotated each round."""

    op: Literal["retime"]
    items: list[TuneItem]
    rounds: int
    timing: TimingSettings


class StopRequest(TypedDict):
    """The worker exits."""

    op: Literal["stop"]


TuneRequest = MeasureRequest | RetimeRequest | StopRequest
"""<mailbox>/req_<n>.json."""


class ItemFailure(TypedDict):
    """Why an item failed in the worker (its MeasureLine's status, error and fatal)."""

    status: str
    error: str  # "<kind>: <message>"
    fatal: bool  # a CUDA error: the context is gone, the worker exits after this line


class MeasureLine(TypedDict):
    """One line of res_<n>.jsonl per measured item: status ok with its timing and its output (a
    file when the bits are new, else only their fingerprint), or failed. The host makes the same
    for items the worker never answered (status crashed or timeout)."""

    key: str
    status: NotRequired[str]
    error: NotRequired[str]
    fatal: NotRequired[bool]
    fingerprint: NotRequired[str]
    file: NotRequired[str]
    time_ms: NotRequired[float]
    iqr_ms: NotRequired[float]
    reps: NotRequired[int]
    gpu_s: NotRequired[float]


class RetimeLine(TypedDict):
    """The one line of a retime: median ms per round and item (None where the item failed)."""

    times: list[list[float | None]]
    errors: dict[str, str]
    fatal: NotRequired[bool]
    gpu_s: float


class DoneLine(TypedDict):
    """The last line of res_<n>.jsonl when the worker lives on."""

    done: Literal[True]

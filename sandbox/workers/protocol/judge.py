"""judge: agent/referee -> judge.py (a trusted host process)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from .common import DiffRecord, LeafDescription, RefereeTask, Tolerances, WorkerDevice, WorkerFailure
from .timing import TimingRecord, TimingSettings


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

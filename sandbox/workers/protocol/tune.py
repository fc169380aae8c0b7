"""tune: agent/tune -> tune_judge.py (trusted, JSON lines over pipes) and tune_worker.py
(untrusted, in the sandbox; a mailbox folder: req_<n>.json in, res_<n>.jsonl out)."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from .common import ExtensionSolutionSpec, LeafDescription, SeededTask, Tolerances
from .timing import TimingSettings


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

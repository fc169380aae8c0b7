"""candidate: agent/referee -> candidate.py (supervisor) <-> candidate_child.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

from .common import LeafDescription, RefereeTask, SolutionSpec, WorkerDevice, WorkerFailure
from .timing import TimingRecord, TimingSettings


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


class HandoffReport(TypedDict):
    """How the child's outputs reached the judge: how many on the GPU (gpu_handoff), and why the
    others went to files, when they did."""

    gpu_outputs: int
    problem: str

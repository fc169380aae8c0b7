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

The documents live in one module per family, and this package re-exports every name, so both sides
import them from here (`from protocol import X` in a worker, `from sandbox.workers.protocol import X`
on the host): `lines` (the result line, `emit`/`parse`, `derive_seed`), `common` (the seeded task,
tolerances, failures, devices, output leaves and their diffs, solution specs), `timing` (the timing
procedure's settings and record), `build`, `task` (the task inspector), `candidate` (spec, supervisor
messages, the completion record), `judge` and `tune`.
"""

from __future__ import annotations

from .build import BuildOutcome, BuildResult, BuildSpec, BuiltStamp, SingleFileBuildSpec, WorkspaceBuildSpec
from .candidate import (
    CandidateRecord,
    CandidateRequest,
    CandidateSpec,
    ChildMessage,
    HandoffReport,
    KernelRow,
    RecheckRecord,
    SignedRecord,
    StateLoad,
    SupervisedRecheck,
    SupervisorAnswer,
    SupervisorView,
    ThreadReport,
    TimingWindow,
    TrialRecord,
)
from .common import (
    DiffRecord,
    ExtensionSolutionSpec,
    LeafDescription,
    RefereeTask,
    SeededTask,
    SingleFileSolutionSpec,
    SolutionSpec,
    Tolerances,
    WorkerDevice,
    WorkerFailure,
    WorkspaceSolutionSpec,
)
from .judge import (
    BaselineError,
    BaselinePart,
    BaselineRequest,
    JudgeBaselines,
    JudgedRecheck,
    JudgedTrial,
    JudgeResult,
    JudgeSpec,
    PrecisionRecord,
    RecheckFile,
    ReferenceOutputs,
    TrialFile,
)
from .lines import RESULT_MARKER, SEED_MASK, derive_seed, emit, parse, stdout_to_stderr
from .task import ArgDescription, InspectResult, TaskFailed, TaskInspected, TaskProblem, TaskReport
from .timing import TimingRecord, TimingSettings
from .tune import (
    DoneLine,
    ItemFailure,
    KnownRequest,
    MeasureLine,
    MeasureRequest,
    RetimeLine,
    RetimeRequest,
    StopJudgeRequest,
    StopRequest,
    TaskFeatures,
    TuneHang,
    TuneItem,
    TuneJudgeAnswer,
    TuneJudgeReady,
    TuneJudgeRequest,
    TuneJudgeSpec,
    TuneRequest,
    TuneSeeds,
    TuneTask,
    TuneVerdict,
    TuneWorkerFailed,
    TuneWorkerReady,
    TuneWorkerSpec,
    TuneWorkerStart,
    VerifyRequest,
)

__all__ = [
    "RESULT_MARKER",
    "SEED_MASK",
    "ArgDescription",
    "BaselineError",
    "BaselinePart",
    "BaselineRequest",
    "BuildOutcome",
    "BuildResult",
    "BuildSpec",
    "BuiltStamp",
    "CandidateRecord",
    "CandidateRequest",
    "CandidateSpec",
    "ChildMessage",
    "DiffRecord",
    "DoneLine",
    "ExtensionSolutionSpec",
    "HandoffReport",
    "InspectResult",
    "ItemFailure",
    "JudgeBaselines",
    "JudgeResult",
    "JudgeSpec",
    "JudgedRecheck",
    "JudgedTrial",
    "KernelRow",
    "KnownRequest",
    "LeafDescription",
    "MeasureLine",
    "MeasureRequest",
    "PrecisionRecord",
    "RecheckFile",
    "RecheckRecord",
    "RefereeTask",
    "ReferenceOutputs",
    "RetimeLine",
    "RetimeRequest",
    "SeededTask",
    "SignedRecord",
    "SingleFileBuildSpec",
    "SingleFileSolutionSpec",
    "SolutionSpec",
    "StateLoad",
    "StopJudgeRequest",
    "StopRequest",
    "SupervisedRecheck",
    "SupervisorAnswer",
    "SupervisorView",
    "TaskFailed",
    "TaskFeatures",
    "TaskInspected",
    "TaskProblem",
    "TaskReport",
    "ThreadReport",
    "TimingRecord",
    "TimingSettings",
    "TimingWindow",
    "Tolerances",
    "TrialFile",
    "TrialRecord",
    "TuneHang",
    "TuneItem",
    "TuneJudgeAnswer",
    "TuneJudgeReady",
    "TuneJudgeRequest",
    "TuneJudgeSpec",
    "TuneRequest",
    "TuneSeeds",
    "TuneTask",
    "TuneVerdict",
    "TuneWorkerFailed",
    "TuneWorkerReady",
    "TuneWorkerSpec",
    "TuneWorkerStart",
    "VerifyRequest",
    "WorkerDevice",
    "WorkerFailure",
    "WorkspaceBuildSpec",
    "WorkspaceSolutionSpec",
    "derive_seed",
    "emit",
    "parse",
    "stdout_to_stderr",
]

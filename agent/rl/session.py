"""One rollout's tools over a fresh workspace, and the sample it becomes.

`KernelSession` is what every RL adapter here wraps (the verifiers toolset, and anything else
that drives our tools turn by turn): it creates a fresh workspace for the task, opens a
sandbox over it, and runs our own tools (agent/tools: files, compile, verify, profile, submit)
with the referee given to it (injectable: tests pass a fake verdict). Nothing it does raises
into the caller: every tool call returns the text the model reads, and a rollout that crashes,
hangs or floods ends as a failed sample with its reason (`RolloutOutcome.failed`).

    session = KernelSession.open(task, root=tmp, referee=referee, config=RolloutConfig())
    text = session.call("write_file", {"path": "kernels/relu.cu", "content": "..."})
    ...
    outcome = session.finish()   # RolloutOutcome: status, reason, reward breakdown

Which verdict is scored: the accepted submission, else the best verified candidate (what
`agent solve` returns), else the last verdict (a failure), else nothing (a failure).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import json
import shutil
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent.budget import Budget, BudgetExhausted, BudgetLimits
from agent.messages import ToolCall
from agent.referee.options import EvalOptions
from agent.referee.results import EvalResult
from agent.rl.reward import RewardBreakdown, TierRewards, reward_from_result
from agent.stops import RunAborted, RunStatus, RunStop, Submitted
from agent.tasks import Task
from agent.tools import Toolbox, ToolContext, ToolSettings
from agent.tools.candidates import CandidateBook, Referee, RefereeAdapter
from agent.tools.files import edit_file, list_files, read_file, write_file
from agent.tools.pipeline import compile_workspace, profile, submit, verify
from agent.tools.skills import list_skills, read_skill
from agent.transcripts.format import EvaluationEvent
from agent.workspace import Workspace
from sandbox.base import Sandbox, open_sandbox

RL_TOOLS = (
    list_files,
    read_file,
    write_file,
    edit_file,
    compile_workspace,
    verify,
    profile,
    submit,
    list_skills,
    read_skill,
)
"""The tools a rollout offers: our own, by their own names and schemas (the system prompt's
skill catalog names list_skills and read_skill, so they are offered too)."""

Status = Literal["running", "submitted", "stopped", "budget_exhausted", "failed"]


class RolloutConfig(BaseModel):
    """How one rollout is run and judged."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    referee: EvalOptions = Field(default_factory=EvalOptions)
    """The referee's options (policy strict/kernelbench, trials, arch, compile timeout)."""
    budget: BudgetLimits = Field(default_factory=lambda: BudgetLimits(turns=None, usd=None))
    """wall and gpu apply to the rollout (turns and tokens are the trainer's to count)."""
    sandbox: str = "local"
    max_tool_calls: int = Field(default=200, ge=1)
    """More calls than this is a flood: the sample fails."""
    max_argument_bytes: int = Field(default=1 << 20, ge=1)
    """A tool call whose arguments are larger (e.g. a 50 MB write_file) is a flood."""
    tool_timeout_s: float = Field(default=1800.0, gt=0)
    """A tool call still running after this is a hang: the sample fails (the call is abandoned)."""
    rewards: TierRewards = Field(default_factory=TierRewards)


class RolloutOutcome(BaseModel):
    """What a finished rollout is to the trainer."""

    status: Status
    reason: str
    failed: bool = Field(description="the rollout crashed, hung or flooded: a failed sample")
    reward: RewardBreakdown
    tool_calls: int = 0
    judged: int = 0
    content_hash: str | None = Field(default=None, description="the scored candidate's workspace")
    result: dict[str, Any] | None = Field(default=None, description="the scored EvalResult (JSON)")


@dataclass
class _Events:
    """The session's EventSink: verdicts kept in memory."""

    events: list[EvaluationEvent] = field(default_factory=list)

    def write(self, event: EvaluationEvent) -> None:
        self.events.append(event)


@dataclass
class KernelSession:
    task: Task
    workspace: Workspace
    sandbox: Sandbox
    context: ToolContext
    config: RolloutConfig
    root: Path
    owns_root: bool = False
    status: Status = "running"
    reason: str = ""
    stop_status: RunStatus | None = None
    """How the run would end in a transcript's run_end (the tool's RunStop said so)."""
    failed: bool = False
    calls: int = 0
    toolbox: Toolbox = field(default_factory=lambda: Toolbox(RL_TOOLS))
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _closed: bool = False

    @classmethod
    def open(
        cls,
        task: Task,
        *,
        root: Path | None = None,
        referee: Referee | None = None,
        config: RolloutConfig | None = None,
        sandbox_options: dict[str, object] | None = None,
    ) -> KernelSession:
        """A fresh workspace for `task` under `root` (a new temporary folder when None)."""
        config = config or RolloutConfig()
        owns = root is None
        root = Path(tempfile.mkdtemp(prefix="kernel-rollout-")) if root is None else Path(root)
        root.mkdir(parents=True, exist_ok=True)
        workspace = Workspace.create(root / "workspace", task)
        box = open_sandbox(config.sandbox, workspace=workspace.root, **(sandbox_options or {}))
        box.__enter__()
        context = ToolContext(
            task=task,
            workspace=workspace,
            sandbox=box,
            referee=referee or RefereeAdapter(config.referee),
            budget=Budget(config.budget),
            candidates=CandidateBook(baseline="eager"),
            events=_Events(),
            settings=ToolSettings(referee=config.referee),
        )
        return cls(task, workspace, box, context, config, root, owns_root=owns)

    @property
    def tool_specs(self) -> list[Any]:
        return self.toolbox.specs

    @property
    def done(self) -> bool:
        return self.status != "running"

    def call(self, name: str, arguments: dict[str, Any] | str | None = None) -> str:
        """Run one tool call; the text the model reads. Never raises."""
        if self.done:
            return f"the rollout has ended ({self.status}: {self.reason}); no more tool calls are run"
        self.calls += 1
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        if self.calls > self.config.max_tool_calls:
            return self._fail(f"flood: more than {self.config.max_tool_calls} tool calls")
        if len(raw.encode()) > self.config.max_argument_bytes:
            return self._fail(
                f"flood: {name} arguments of {len(raw.encode())} bytes (limit {self.config.max_argument_bytes})"
            )
        call = ToolCall.from_raw(id=f"rl_{next(self._ids)}", name=name, raw_arguments=raw)
        self.context.turn = self.calls
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="rl-tool")
        try:
            future = pool.submit(self._run, call)
            try:
                return future.result(timeout=self.config.tool_timeout_s)
            except concurrent.futures.TimeoutError:
                return self._fail(f"hang: {name} still running after {self.config.tool_timeout_s:g} s")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _run(self, call: ToolCall) -> str:
        try:
            self.context.budget.check()
            output = self.toolbox.call(self.context, call)
        except Submitted as stop:
            self.status, self.reason, self.stop_status = "submitted", str(stop), stop.status
            return str(stop)
        except BudgetExhausted as stop:
            self.status, self.reason, self.stop_status = "budget_exhausted", str(stop), stop.status
            return str(stop)
        except RunAborted as stop:
            self.stop_status = stop.status
            return self._fail(f"{stop.status}: {stop}")
        except RunStop as stop:
            self.status, self.reason, self.stop_status = "stopped", str(stop), stop.status
            return str(stop)
        except Exception as exc:
            tail = traceback.format_exc().strip().splitlines()[-1]
            return self._fail(f"crash: {call.name} raised {type(exc).__name__}: {exc} ({tail})")
        return f"ERROR: {output.content}" if output.is_error else output.content

    def fail(self, reason: str) -> None:
        """End the rollout as a failed sample for a reason outside the tools (the policy broke)."""
        self._fail(reason)

    def _fail(self, reason: str) -> str:
        if not self.done:
            self.status, self.reason, self.failed = "failed", reason, True
        return f"the rollout failed: {reason}"

    def scored_result(self) -> EvalResult | None:
        book = self.context.candidates
        chosen = book.submitted or book.best or book.latest
        return chosen.result if chosen is not None else None

    def finish(self, reason: str = "the rollout ended without a submission") -> RolloutOutcome:
        """End the session, close it and score it (idempotent)."""
        if not self.done:
            self.status, self.reason = "stopped", reason
        outcome = self.outcome()
        self.close()
        return outcome

    def outcome(self) -> RolloutOutcome:
        """The sample as it stands now (a running session is scored as if it ended here)."""
        book = self.context.candidates
        chosen = book.submitted or book.best or book.latest
        if self.failed:
            breakdown = RewardBreakdown(
                reward=self.config.rewards.failure, tier=0, reason=f"failed sample: {self.reason}"
            )
        else:
            breakdown = reward_from_result(
                chosen.result if chosen is not None else None, rewards=self.config.rewards
            )
        return RolloutOutcome(
            status=self.status,
            reason=self.reason,
            failed=self.failed,
            reward=breakdown,
            tool_calls=self.calls,
            judged=len(book.history),
            content_hash=chosen.content_hash if chosen is not None else None,
            result=chosen.result.model_dump(mode="json") if chosen is not None else None,
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self.sandbox.__exit__(None, None, None)
        if self.owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

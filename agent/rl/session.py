"""One rollout's tools over a fresh workspace, and the sample it becomes.

`KernelSession` is what every RL adapter here wraps (the verifiers toolset, and anything else
that drives our tools turn by turn): it creates a fresh workspace for the task, opens a
sandbox over it, and runs our own tools (agent/tools: files, compile, verify, profile, submit)
with the referee given to it (injectable: tests pass a fake verdict). Nothing it does raises
into the caller: every tool call returns a `ToolOutput` (`run`; `call` gives its text), and a
rollout that crashes, hangs or floods ends as a failed sample with its reason
(`RolloutOutcome.failed`). `execute` is the agent loop's tool executor (agent/run/loop.py): once
the rollout has ended it raises the RunStop that ends the loop.

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
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from agent.budget import Budget, BudgetLimits
from agent.messages import ToolCall
from agent.referee.options import EvalOptions
from agent.referee.results import EvalResult
from agent.rl.reward import RewardBreakdown, TierRewards, reward_from_result
from agent.run.setup import tool_context
from agent.stops import AbortStatus, RunAborted, RunStatus, RunStop
from agent.tasks import Task
from agent.tools import WORKSPACE_TOOLS, Toolbox, ToolContext, ToolOutput, ToolSettings
from agent.tools.candidates import Referee, RefereeAdapter
from agent.tools.skills import list_skills, read_skill
from agent.transcripts.format import EvaluationEvent
from agent.workspace import Workspace
from sandbox.base import Sandbox, open_sandbox

RL_TOOLS = (*WORKSPACE_TOOLS, list_skills, read_skill)
"""The tools a rollout offers: our own, by their own names and schemas (the system prompt's
skill catalog names list_skills and read_skill, so they are offered too)."""

Status = Literal["running", "submitted", "stopped", "budget_exhausted", "failed"]
FAILED_STATUSES: frozenset[RunStatus] = frozenset(
    {*get_args(AbortStatus), "model_error", "sandbox_error", "interrupted"}
)
"""How a run ends when it is no fault of the model's work: such a rollout is a failed sample."""


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
    _stop: RunStop | None = None
    """The tool's RunStop that ended the rollout (not a failure): `execute` raises it again."""
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
        context = tool_context(
            task,
            workspace,
            box,
            referee=referee or RefereeAdapter(config.referee),
            budget=Budget(config.budget),
            baseline="eager",
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
        """Run one tool call by name, for a channel with no turns and no error flag (MCP): the text
        the model reads (`ToolOutput.as_text`). Never raises."""
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
        if not self.done:
            self.context.turn = self.calls + 1
        return self.run(ToolCall.from_raw(id=f"rl_{next(self._ids)}", name=name, raw_arguments=raw)).as_text()

    def run(self, call: ToolCall) -> ToolOutput:
        """Run one tool call under the rollout's rules: a flood, a hang or a crash fails the sample,
        a RunStop ends the rollout, and a call after the end runs nothing. Never raises."""
        if self.done:
            return ToolOutput(
                f"the rollout has ended ({self.status}: {self.reason}); no more tool calls are run"
            )
        self.calls += 1
        size = len(call.raw_arguments.encode())
        if self.calls > self.config.max_tool_calls:
            return self._fail(f"flood: more than {self.config.max_tool_calls} tool calls")
        if size > self.config.max_argument_bytes:
            return self._fail(
                f"flood: {call.name} arguments of {size} bytes (limit {self.config.max_argument_bytes})"
            )
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="rl-tool")
        try:
            future = pool.submit(self._run, call)
            try:
                return future.result(timeout=self.config.tool_timeout_s)
            except concurrent.futures.TimeoutError:
                return self._fail(f"hang: {call.name} still running after {self.config.tool_timeout_s:g} s")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def execute(self, call: ToolCall) -> ToolOutput:
        """The agent loop's tool executor (`AgentLoop.execute`): `run`, then, once the rollout has
        ended, the RunStop that ends the loop too (its text is what `run` returned)."""
        output = self.run(call)
        if self.done:
            raise self._stop or RunAborted("error", output.content)
        return output

    def _run(self, call: ToolCall) -> ToolOutput:
        try:
            self.context.budget.check()
            return self.toolbox.call(self.context, call)
        except RunStop as stop:
            self.end(stop.status, str(stop), stop)
            return ToolOutput(f"the rollout failed: {self.reason}" if self.failed else str(stop))
        except Exception as exc:
            tail = traceback.format_exc().strip().splitlines()[-1]
            return self._fail(f"crash: {call.name} raised {type(exc).__name__}: {exc} ({tail})")

    def end(self, status: RunStatus, reason: str, stop: RunStop | None = None) -> None:
        """End the rollout with a run's status: a tool's RunStop, or the stop of the loop that drives
        the session. A status that is no fault of the model's work (an abort, a model or harness
        error) fails the sample."""
        if self.done:
            return
        self.stop_status = status
        if status in FAILED_STATUSES:
            self._fail(f"{status}: {reason}")
            return
        self.status, self.reason, self._stop = _session_status(status), reason, stop

    def fail(self, reason: str) -> None:
        """End the rollout as a failed sample for a reason outside the tools (the policy broke)."""
        self._fail(reason)

    def _fail(self, reason: str) -> ToolOutput:
        if not self.done:
            self.status, self.reason, self.failed = "failed", reason, True
        return ToolOutput(f"the rollout failed: {reason}")

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


def _session_status(status: RunStatus) -> Status:
    if status.startswith("submitted"):
        return "submitted"
    if status.startswith("budget_exhausted"):
        return "budget_exhausted"
    return "stopped"

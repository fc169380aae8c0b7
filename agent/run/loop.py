"""The agent loop: query the model, run its tool calls, record everything, check the budget, repeat.

It stops on a `RunStop` (Submitted, BudgetExhausted, ModelStopped, RunAborted), each carrying the
run's status; a model error, a sandbox failure or a bug ends it too, with the status recorded.
`agent solve` runs it over the toolbox; RL rollouts and the slot environment run it over a
`KernelSession` (agent/rl/session.py), whose executor applies the rollout's failure rules.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.budget import BudgetExhausted
from agent.messages import Message, ModelResponse, ToolCall, ToolResultMessage, UserMessage
from agent.models.base import CallTimeLimitReached, Model, ModelError, call_time_limit
from agent.run.context import ContextWindow
from agent.stops import ModelStopped, RunStatus, RunStop, Submitted
from agent.tools import Toolbox, ToolContext, ToolOutput
from agent.transcripts.format import (
    BudgetEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from sandbox.base import SandboxError

NO_TOOL_CALL = (
    "You replied without calling a tool. Keep working with the tools (write_file, edit_file, compile, "
    "verify, profile); call submit when you are done."
)
CUT_OFF = "Your reply was cut off at the output token limit. Write less per turn, e.g. one file per write_file call."


@dataclass(frozen=True)
class LoopOutcome:
    status: RunStatus
    message: str
    summary: str = ""
    traceback: str | None = None


Progress = Callable[[ToolContext, str], None]
ToolExecutor = Callable[[ToolCall], ToolOutput]
"""Runs one tool call; a RunStop it raises ends the run (its text is the call's result)."""


class EventLog(Protocol):
    """Where the loop records what happens: the run's TranscriptWriter."""

    def write(self, event: Any) -> object: ...


@dataclass
class AgentLoop:
    model: Model
    toolbox: Toolbox
    context: ToolContext
    transcript: EventLog
    max_output_tokens: int | None = None
    progress: Progress = lambda ctx, note: None
    max_idle_turns: int = 3
    """Text-only replies in a row before the run ends as model_stopped."""
    window: ContextWindow = field(default_factory=ContextWindow)
    """Which old turns each request folds into the digest (the whole history stays in `messages`)."""
    execute: ToolExecutor | None = None
    """Runs each tool call; None: `toolbox` with `context`."""
    messages: list[Message] = field(default_factory=list)
    _recorded: int = 0
    _idle_turns: int = 0

    def run(self, messages: list[Message]) -> LoopOutcome:
        self.messages = list(messages)
        try:
            while True:
                self.step()
        except RunStop as stop:
            return LoopOutcome(stop.status, str(stop), summary=getattr(stop, "summary", ""))
        except ModelError as exc:
            return LoopOutcome("model_error", str(exc))
        except SandboxError as exc:
            return LoopOutcome("sandbox_error", str(exc))
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM/SIGHUP (agent/run/signals.py)
            return LoopOutcome("interrupted", str(stop) or "interrupted by the user (Ctrl-C)")
        except Exception as exc:
            return LoopOutcome("error", f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())

    def step(self) -> None:
        budget = self.context.budget
        budget.check()
        self.context.turn += 1
        response = self.query()
        calls = response.message.tool_calls
        replies: list[Message] = [self.run_tool(call) for call in calls] if calls else [self.nudge(response)]
        self.messages.extend(_with_line(replies, budget.remaining_line()))
        self.transcript.write(BudgetEvent(turn=self.context.turn, usage=budget.usage(), limits=budget.limits))

    def query(self) -> ModelResponse:
        budget, turn = self.context.budget, self.context.turn
        max_output_tokens = budget.max_output_tokens(self.max_output_tokens)
        request = self.window.next_request(self.messages, self.context, self.toolbox.specs, self.transcript)
        self.transcript.write(
            ModelRequestEvent(
                turn=turn,
                messages=self.messages[self._recorded :],
                message_count=len(self.messages),
                max_output_tokens=max_output_tokens,
            )
        )
        self.progress(self.context, "waiting for the model")
        try:
            with call_time_limit(budget.wall_left()):
                response = self.model.query(request, self.toolbox.specs, max_output_tokens=max_output_tokens)
        except CallTimeLimitReached as exc:
            raise BudgetExhausted("wall", f"the wall budget ran out waiting for the model: {exc}") from exc
        budget.charge_model_call(response)
        self.transcript.write(ModelResponseEvent(turn=turn, response=response))
        self.messages.append(response.message)
        self._recorded = len(self.messages)
        return response

    def run_tool(self, call: ToolCall) -> ToolResultMessage:
        self._idle_turns = 0
        self.transcript.write(ToolCallEvent(turn=self.context.turn, call=call))
        self.progress(self.context, f"running {call.name}")
        try:
            output = self.execute(call) if self.execute else self.toolbox.call(self.context, call)
        except RunStop as stop:
            self._record_result(call, ToolOutput(str(stop), is_error=not isinstance(stop, Submitted)))
            raise
        self._record_result(call, output)
        return ToolResultMessage(
            tool_call_id=call.id, tool_name=call.name, content=output.content, is_error=output.is_error
        )

    def nudge(self, response: ModelResponse) -> UserMessage:
        self._idle_turns += 1
        if self._idle_turns >= self.max_idle_turns:
            raise ModelStopped(f"the model answered {self._idle_turns} turns in a row without calling a tool")
        return UserMessage(text=CUT_OFF if response.stop_reason == "max_tokens" else NO_TOOL_CALL)

    def _record_result(self, call: ToolCall, output: ToolOutput) -> None:
        self.transcript.write(
            ToolResultEvent(
                turn=self.context.turn,
                tool_call_id=call.id,
                tool_name=call.name,
                content=output.content,
                is_error=output.is_error,
                duration_s=round(output.duration_s, 3),
                data=output.data,
            )
        )
        self.progress(self.context, f"{call.name}: {'error' if output.is_error else 'ok'}")


def _with_line(replies: list[Message], line: str) -> list[Message]:
    """The replies with `line` added to the last one (the model reads it before its next turn)."""
    *head, last = replies
    if isinstance(last, ToolResultMessage):
        return [*head, last.model_copy(update={"content": f"{last.content}\n\n{line}"})]
    assert isinstance(last, UserMessage)
    return [*head, last.model_copy(update={"text": f"{last.text}\n\n{line}"})]

"""A `Model` that plays a script, for tests: each call returns the next step, and any call beyond the
script, or any step left unused, is an error."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent.messages import AssistantMessage, Message, ModelResponse, ToolCall, ToolSpec, Usage

ScriptedReply = AssistantMessage | ModelResponse
ScriptedStep = ScriptedReply | BaseException | Callable[[list[Message], list[ToolSpec]], ScriptedReply]
"""A turn to return, a full response (to script usage, cost or stop reason), an exception to raise (e.g.
a ModelError), or a function of the conversation so far that returns the turn."""

_call_ids = itertools.count(1)


class UnexpectedModelCall(AssertionError):
    pass


class UnusedModelSteps(AssertionError):
    pass


@dataclass(frozen=True)
class ScriptedCall:
    """What the model was sent on one call (a detached copy)."""

    messages: list[Message]
    tools: list[ToolSpec]
    max_output_tokens: int | None


class ScriptedModel:
    def __init__(
        self,
        steps: Sequence[ScriptedStep],
        *,
        name: str = "scripted",
        usage: Usage | None = None,
        cost_usd: float | None = 0.0,
    ) -> None:
        """`usage` and `cost_usd` are reported for every step given as an AssistantMessage."""
        self.name = name
        self.steps = list(steps)
        self.calls: list[ScriptedCall] = []
        self._usage = usage or Usage()
        self._cost_usd = cost_usd
        self._unexpected_calls = 0

    @property
    def remaining_steps(self) -> int:
        return max(0, len(self.steps) - len(self.calls))

    def query(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        messages, tools = copy.deepcopy(list(messages)), copy.deepcopy(list(tools))
        if len(self.calls) >= len(self.steps):
            self._unexpected_calls += 1
            last = messages[-1].model_dump_json() if messages else "no messages"
            raise UnexpectedModelCall(
                f"{self.name}: call {len(self.calls) + 1} but the script has {len(self.steps)} steps; "
                f"last message: {last[:500]}"
            )
        step = self.steps[len(self.calls)]
        self.calls.append(ScriptedCall(messages=messages, tools=tools, max_output_tokens=max_output_tokens))
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            step = step(copy.deepcopy(messages), copy.deepcopy(tools))
        return self._as_response(step)

    def _as_response(self, reply: ScriptedReply) -> ModelResponse:
        if isinstance(reply, ModelResponse):
            return reply
        return ModelResponse(
            message=reply,
            usage=self._usage,
            cost_usd=self._cost_usd,
            stop_reason="tool_use" if reply.tool_calls else "end_turn",
            model=self.name,
        )

    def assert_complete(self) -> None:
        """Raise unless every step was used and no call went beyond the script (even one the caller caught)."""
        if self._unexpected_calls:
            raise UnexpectedModelCall(
                f"{self.name}: called {self._unexpected_calls} time(s) beyond its {len(self.steps)} steps"
            )
        if self.remaining_steps:
            raise UnusedModelSteps(
                f"{self.name}: {self.remaining_steps} of {len(self.steps)} steps never used "
                f"(called {len(self.calls)} times)"
            )


def text_turn(text: str) -> AssistantMessage:
    return AssistantMessage(text=text)


def tool_call_turn(
    name: str, arguments: dict[str, Any] | str | None = None, *, call_id: str | None = None, text: str = ""
) -> AssistantMessage:
    """An assistant turn with one tool call. A str `arguments` is taken as the raw JSON the model wrote
    (so a test can script malformed arguments)."""
    raw_arguments = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    call = ToolCall.from_raw(id=call_id or f"call_{next(_call_ids)}", name=name, raw_arguments=raw_arguments)
    return AssistantMessage(text=text, tool_calls=[call])

"""The provider-neutral conversation: what the loop, transcripts and every model adapter share.

Adapters (agent/models/) convert these to and from each provider's wire format. Anything a provider
needs back verbatim on the next request (e.g. Anthropic thinking blocks and their signatures) lives in
`AssistantMessage.provider_details`, never in the shared fields.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolSpec(_Frozen):
    """A tool as the model sees it."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON schema of the arguments object."""


class ToolCall(_Frozen):
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    """The parsed arguments object; None when `raw_arguments` is not a JSON object."""
    raw_arguments: str
    """The arguments exactly as the model wrote them."""
    parse_error: str | None = None
    """Why `raw_arguments` could not be parsed; the loop reports it to the model as a tool error."""

    @classmethod
    def from_raw(cls, *, id: str, name: str, raw_arguments: str) -> ToolCall:
        """Parse arguments the model wrote as JSON text; bad JSON becomes `parse_error`, never an exception."""
        if not raw_arguments.strip():
            # Several OpenAI-compatible servers send "" for a call without arguments.
            return cls(id=id, name=name, arguments={}, raw_arguments=raw_arguments)
        try:
            parsed = json.loads(raw_arguments)
        except json.JSONDecodeError as exc:
            error = f"arguments are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            return cls(id=id, name=name, arguments=None, raw_arguments=raw_arguments, parse_error=error)
        if not isinstance(parsed, dict):
            error = f"arguments must be a JSON object, got {_json_kind(parsed)}"
            return cls(id=id, name=name, arguments=None, raw_arguments=raw_arguments, parse_error=error)
        return cls(id=id, name=name, arguments=parsed, raw_arguments=raw_arguments)


def _json_kind(value: object) -> str:
    match value:
        case list():
            return "an array"
        case str():
            return "a string"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case None:
            return "null"
        case _:
            return type(value).__name__


class SystemMessage(_Frozen):
    role: Literal["system"] = "system"
    text: str


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    text: str


class AssistantMessage(_Frozen):
    role: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    provider_details: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific content that must go back unchanged on later requests to the same provider."""


class ToolResultMessage(_Frozen):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="role"),
]


class Usage(_Frozen):
    """Tokens of one model call. The four counts are disjoint: their sum is the whole prompt plus output."""

    input_tokens: int = 0
    """Prompt tokens billed at the full input price (neither read from nor written to a cache)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Every prompt token, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


StopReason = Literal["end_turn", "tool_use", "max_tokens", "content_filter", "other"]


class ModelResponse(_Frozen):
    """One model call: the neutral assistant turn plus everything the transcript keeps about the call."""

    message: AssistantMessage
    usage: Usage = Usage()
    cost_usd: float | None = None
    """None when the model has no known price (never a guess)."""
    stop_reason: StopReason = "end_turn"
    model: str
    """The model that answered, as the provider named it."""
    latency_s: float = 0.0
    """Wall time of the whole call, retries included."""
    attempts: int = 1
    raw_request: dict[str, Any] = Field(default_factory=dict)
    """The request body exactly as sent to the provider."""
    raw_response: dict[str, Any] = Field(default_factory=dict)
    """The response body exactly as the provider returned it."""

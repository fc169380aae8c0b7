"""Anthropic Messages API adapter: neutral messages <-> Messages wire format, native tool use."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, assert_never

import anthropic
from anthropic.types import (
    BashCodeExecutionToolResultBlock,
    CodeExecutionToolResultBlock,
    ContainerUploadBlock,
    RedactedThinkingBlock,
    ServerToolUseBlock,
    TextBlock,
    TextEditorCodeExecutionToolResultBlock,
    ThinkingBlock,
    ToolSearchToolResultBlock,
    ToolUseBlock,
    WebFetchToolResultBlock,
    WebSearchToolResultBlock,
)
from anthropic.types import Message as WireMessage
from anthropic.types import StopReason as WireStopReason

from agent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    StopReason,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from agent.models.base import DEFAULT_REQUEST_TIMEOUT_S, RetryPolicy
from agent.models.prices import PriceTable, load_prices
from agent.models.sdk import ProviderSdk, api_key, sdk_errors

OPAQUE_BLOCKS = "anthropic_blocks"
"""provider_details key: blocks other than text and tool_use (thinking with its signature, ...), kept
verbatim because Anthropic requires them back unchanged on the next request."""

SDK = ProviderSdk(
    provider="anthropic", default_base_url="https://api.anthropic.com", errors=sdk_errors(anthropic)
)


def anthropic_client(
    *,
    base_url: str | None = None,
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> anthropic.Anthropic:
    """The default client: key from ANTHROPIC_API_KEY, the SDK's own retries off (tenacity owns them)."""
    key = api_key("anthropic", env)
    # An explicit timeout also turns off the SDK's refusal of large max_tokens without streaming.
    return anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)


class AnthropicModel:
    """`Model` over the Anthropic Messages API. The client is injected; see `anthropic_client`."""

    def __init__(
        self,
        model: str,
        client: anthropic.Anthropic,
        *,
        prices: PriceTable | None = None,
        retry: RetryPolicy | None = None,
        default_max_output_tokens: int = 16_384,
        prompt_caching: bool = True,
        extra_params: Mapping[str, Any] | None = None,
        request_timeout_s: float | None = None,
    ) -> None:
        """`request_timeout_s`: seconds one request may wait for its answer (default: the client's)."""
        self.model = model
        self.name = f"anthropic:{model}"
        self._client = client.with_options(max_retries=0)
        self._calls = SDK.calls(client, model, retry=retry, request_timeout_s=request_timeout_s)
        self._prices = prices if prices is not None else load_prices()
        self._default_max_output_tokens = default_max_output_tokens
        self._prompt_caching = prompt_caching
        self._extra_params = dict(extra_params or {})

    def query(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        request = build_request(
            self.model,
            messages,
            tools,
            max_tokens=max_output_tokens or self._default_max_output_tokens,
            prompt_caching=self._prompt_caching,
            extra_params=self._extra_params,
        )
        answer = self._calls.send(
            self._client.messages.with_raw_response.create,
            request,
            is_answer=lambda _wire, body: isinstance(body.get("content"), list),
            not_an_answer="not a message",
        )
        wire = answer.parsed
        usage = usage_from_wire(wire)
        return answer.response(
            message=assistant_from_wire(wire),
            usage=usage,
            cost_usd=self._prices.cost_usd("anthropic", self.model, usage),
            stop_reason=stop_reason_from_wire(wire.stop_reason),
            model=wire.model,
        )


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    max_tokens: int,
    prompt_caching: bool = True,
    extra_params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    system, turns = _to_wire_turns(messages)
    if prompt_caching:
        _mark_cache_breakpoints(system, turns)
    request: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": turns}
    if system:
        request["system"] = system
    if tools:
        request["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            for tool in tools
        ]
    request.update(extra_params or {})
    return request


def _to_wire_turns(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """System blocks (Anthropic takes them apart from the turns) and the user/assistant turns.

    Consecutive messages of one wire role share a turn: tool results and any user note after them form
    the single user turn Anthropic requires after an assistant turn with tool_use.
    """
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        match message:
            case SystemMessage():
                system.append({"type": "text", "text": message.text})
            case UserMessage():
                add("user", [{"type": "text", "text": message.text}])
            case ToolResultMessage():
                add(
                    "user",
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": message.tool_call_id,
                            "content": message.content,
                            "is_error": message.is_error,
                        }
                    ],
                )
            case AssistantMessage():
                # An empty assistant turn is dropped: the API rejects empty content before the last turn.
                add("assistant", _assistant_blocks(message))
            case _:
                assert_never(message)
    return system, turns


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [dict(block) for block in message.provider_details.get(OPAQUE_BLOCKS, [])]
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments or {}}
        for call in message.tool_calls
    )
    return blocks


_CACHEABLE_BLOCKS = {"text", "tool_result", "tool_use"}


def _mark_cache_breakpoints(system: list[dict[str, Any]], turns: list[dict[str, Any]]) -> None:
    """Cache the prompt prefix: tools + system, and the whole conversation up to the newest block.

    An agent loop resends its growing history every turn, so reading it from the cache costs a tenth.
    """
    if system:
        system[-1]["cache_control"] = {"type": "ephemeral"}
    if turns and turns[-1]["content"][-1]["type"] in _CACHEABLE_BLOCKS:
        turns[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}


def assistant_from_wire(wire: WireMessage) -> AssistantMessage:
    texts: list[str] = []
    tool_calls: list[ToolCall] = []
    opaque: list[dict[str, Any]] = []
    for block in wire.content:
        match block:
            case TextBlock():
                texts.append(block.text)
            case ToolUseBlock():
                tool_calls.append(_tool_call_from_wire(block))
            case (
                ThinkingBlock()
                | RedactedThinkingBlock()
                | ServerToolUseBlock()
                | WebSearchToolResultBlock()
                | WebFetchToolResultBlock()
                | CodeExecutionToolResultBlock()
                | BashCodeExecutionToolResultBlock()
                | TextEditorCodeExecutionToolResultBlock()
                | ToolSearchToolResultBlock()
                | ContainerUploadBlock()
            ):
                opaque.append(block.to_dict())
            case _:
                assert_never(block)
    details: dict[str, Any] = {OPAQUE_BLOCKS: opaque} if opaque else {}
    return AssistantMessage(text="\n\n".join(texts), tool_calls=tool_calls, provider_details=details)


def _tool_call_from_wire(block: ToolUseBlock) -> ToolCall:
    raw_arguments = json.dumps(block.input)
    if isinstance(block.input, dict):
        return ToolCall(id=block.id, name=block.name, arguments=block.input, raw_arguments=raw_arguments)
    return ToolCall.from_raw(id=block.id, name=block.name, raw_arguments=raw_arguments)


def usage_from_wire(wire: WireMessage) -> Usage:
    usage = wire.usage
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
    )


def stop_reason_from_wire(reason: WireStopReason | None) -> StopReason:
    match reason:
        case "end_turn" | "stop_sequence":
            return "end_turn"
        case "tool_use":
            return "tool_use"
        case "max_tokens" | "model_context_window_exceeded":
            return "max_tokens"
        case "refusal":
            return "content_filter"
        case "pause_turn" | None:
            return "other"
        case _:
            assert_never(reason)

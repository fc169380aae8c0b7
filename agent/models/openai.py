"""OpenAI Chat Completions adapter: neutral messages <-> Chat Completions wire format, native tool calls.

Chat Completions (not the Responses API) because vLLM, SGLang, Ollama and other OpenAI-compatible servers
speak it; those are reached through a base URL.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, assert_never

import openai
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessage,
    ChatCompletionMessageCustomToolCall,
    ChatCompletionMessageFunctionToolCall,
)

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

LOCAL_SERVER_PLACEHOLDER_KEY = "not-needed"
"""Sent to a base-URL server when no key is set: the SDK insists on one, most local servers ignore it."""
REASONING_CONTENT = "openai_reasoning_content"
REFUSAL = "openai_refusal"

SDK = ProviderSdk(provider="openai", default_base_url="https://api.openai.com/v1", errors=sdk_errors(openai))


def openai_client(
    *,
    base_url: str | None = None,
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> openai.OpenAI:
    """The default client: key from OPENAI_API_KEY (optional with a base URL), SDK retries off."""
    key = api_key("openai", env, fallback=None if base_url is None else LOCAL_SERVER_PLACEHOLDER_KEY)
    return openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)


class OpenAIModel:
    """`Model` over Chat Completions. The client is injected; see `openai_client`."""

    def __init__(
        self,
        model: str,
        client: openai.OpenAI,
        *,
        prices: PriceTable | None = None,
        retry: RetryPolicy | None = None,
        default_max_output_tokens: int | None = None,
        extra_params: Mapping[str, Any] | None = None,
        request_timeout_s: float | None = None,
    ) -> None:
        """`request_timeout_s`: seconds one request may wait for its answer (default: the client's)."""
        self.model = model
        self._client = client.with_options(max_retries=0)
        self._calls = SDK.calls(client, model, retry=retry, request_timeout_s=request_timeout_s)
        self._is_openai = self._calls.is_provider_url
        base_url = self._calls.endpoint.url
        self.name = f"openai:{model}" if self._is_openai else f"openai:{model}@{base_url}"
        self._prices = prices if prices is not None else load_prices()
        self._default_max_output_tokens = default_max_output_tokens
        self._extra_params = dict(extra_params or {})

    def query(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        max_tokens = max_output_tokens or self._default_max_output_tokens
        request = build_request(
            self.model,
            messages,
            tools,
            max_tokens=max_tokens,
            # OpenAI's reasoning models reject max_tokens; compatible servers all accept it.
            max_tokens_param="max_completion_tokens" if self._is_openai else "max_tokens",
            extra_params=self._extra_params,
        )
        answer = self._calls.send(
            self._client.chat.completions.with_raw_response.create,
            request,
            is_answer=lambda completion, _body: bool(completion.choices),
            not_an_answer="no choices in the answer",
        )
        completion = answer.parsed
        choice = completion.choices[0]
        usage = usage_from_wire(completion)
        return answer.response(
            message=assistant_from_wire(choice.message),
            usage=usage or Usage(),
            cost_usd=None if usage is None else self._prices.cost_usd("openai", self.model, usage),
            stop_reason=stop_reason_from_wire(choice.finish_reason),
            model=completion.model or self.model,
        )


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    max_tokens: int | None = None,
    max_tokens_param: str = "max_completion_tokens",
    extra_params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {"model": model, "messages": [_to_wire(message) for message in messages]}
    if tools:
        request["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in tools
        ]
    if max_tokens is not None:
        request[max_tokens_param] = max_tokens
    request.update(extra_params or {})
    return request


def _to_wire(message: Message) -> dict[str, Any]:
    match message:
        case SystemMessage():
            return {"role": "system", "content": message.text}
        case UserMessage():
            return {"role": "user", "content": message.text}
        case ToolResultMessage():
            return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
        case AssistantMessage():
            wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                wire["tool_calls"] = [_tool_call_to_wire(call) for call in message.tool_calls]
            elif not message.text:
                wire["content"] = ""
            return wire
        case _:
            assert_never(message)


def _tool_call_to_wire(call: ToolCall) -> dict[str, Any]:
    # Unparseable arguments go back as "{}": vLLM json-decodes past arguments to render its chat
    # template and would reject the whole request; the tool error the loop sends quotes the bad text.
    arguments = "{}" if call.parse_error else call.raw_arguments
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def assistant_from_wire(message: ChatCompletionMessage) -> AssistantMessage:
    tool_calls: list[ToolCall] = []
    for call in message.tool_calls or []:
        match call:
            case ChatCompletionMessageFunctionToolCall():
                tool_calls.append(
                    ToolCall.from_raw(
                        id=call.id or _new_call_id(),
                        name=call.function.name,
                        raw_arguments=call.function.arguments or "",
                    )
                )
            case ChatCompletionMessageCustomToolCall():
                tool_calls.append(
                    ToolCall(
                        id=call.id or _new_call_id(),
                        name=call.custom.name,
                        arguments=None,
                        raw_arguments=call.custom.input,
                        parse_error="free-form (custom) tool calls are not supported; call a function tool",
                    )
                )
            case _:
                assert_never(call)
    details: dict[str, Any] = {}
    # vLLM, SGLang and DeepSeek return the reasoning trace beside the content; recorded, never resent.
    reasoning = (message.model_extra or {}).get("reasoning_content")
    if reasoning:
        details[REASONING_CONTENT] = reasoning
    if message.refusal:
        details[REFUSAL] = message.refusal
    return AssistantMessage(text=message.content or "", tool_calls=tool_calls, provider_details=details)


def _new_call_id() -> str:
    """For servers that leave tool call ids out: the tool result must name the call it answers."""
    return f"call_{uuid.uuid4().hex[:24]}"


def usage_from_wire(completion: ChatCompletion) -> Usage | None:
    usage = completion.usage
    if usage is None:
        return None
    details = usage.prompt_tokens_details
    cache_read = (details.cached_tokens if details else None) or 0
    cache_write = (details.cache_write_tokens if details else None) or 0
    return Usage(
        input_tokens=max(0, usage.prompt_tokens - cache_read - cache_write),
        output_tokens=usage.completion_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def stop_reason_from_wire(reason: str | None) -> StopReason:
    match reason:
        case "stop":
            return "end_turn"
        case "tool_calls" | "function_call":
            return "tool_use"
        case "length":
            return "max_tokens"
        case "content_filter":
            return "content_filter"
        case _:
            return "other"

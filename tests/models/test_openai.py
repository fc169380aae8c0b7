"""The OpenAI adapter against the real `openai` SDK talking to a local Chat Completions server."""

from __future__ import annotations

import json

import httpx2
import openai
import pytest

from agent.messages import SystemMessage, ToolResultMessage, ToolSpec, Usage, UserMessage
from agent.models.openai import REASONING_CONTENT, OpenAIModel
from tests.models.conftest import TEST_KEY
from tests.models.wire_server import Reply, WireServer, openai_completion, openai_tool_call

COMPILE = ToolSpec(
    name="compile",
    description="Build the extension.",
    parameters={"type": "object", "properties": {"verbose": {"type": "boolean"}}},
)


def test_text_reply_records_usage_with_cached_tokens_and_cost(
    wire_server: WireServer, openai_model: OpenAIModel
) -> None:
    body = openai_completion(
        content="Hello.",
        usage={
            "prompt_tokens": 12_000,
            "completion_tokens": 3_000,
            "total_tokens": 15_000,
            "prompt_tokens_details": {"cached_tokens": 10_000},
        },
    )
    wire_server.script(Reply(body=body))

    response = openai_model.query([SystemMessage(text="Be brief."), UserMessage(text="Hi")], [])

    assert response.message.text == "Hello."
    assert response.message.tool_calls == []
    assert response.stop_reason == "end_turn"
    assert response.model == "gpt-4o-2024-08-06"
    assert response.usage == Usage(input_tokens=2_000, output_tokens=3_000, cache_read_tokens=10_000)
    # gpt-4o: $2.50 in, $10 out, $1.25 cached input per million tokens
    assert response.cost_usd == pytest.approx((2_000 * 2.50 + 3_000 * 10 + 10_000 * 1.25) / 1e6)
    assert response.raw_response == body
    [request] = wire_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {TEST_KEY}"
    assert (
        request.body
        == response.raw_request
        == {
            "model": "gpt-4o",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        }
    )


def test_tool_call_round_trip(wire_server: WireServer, openai_model: OpenAIModel) -> None:
    wire_server.script(
        Reply(
            body=openai_completion(
                content=None,
                tool_calls=[openai_tool_call("call_abc", "compile", '{"verbose": true}')],
                finish_reason="tool_calls",
            )
        ),
        Reply(body=openai_completion(content="It builds.")),
    )
    conversation = [SystemMessage(text="You write CUDA."), UserMessage(text="Build it.")]

    first = openai_model.query(conversation, [COMPILE], max_output_tokens=256)

    assert first.stop_reason == "tool_use"
    [call] = first.message.tool_calls
    assert (call.id, call.name, call.arguments, call.parse_error) == (
        "call_abc",
        "compile",
        {"verbose": True},
        None,
    )
    conversation += [
        first.message,
        ToolResultMessage(tool_call_id="call_abc", tool_name="compile", content="ok: 1 kernel"),
    ]
    second = openai_model.query(conversation, [COMPILE])

    assert second.message.text == "It builds."
    first_request, second_request = (request.body for request in wire_server.requests)
    assert first_request["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "compile",
                "description": "Build the extension.",
                "parameters": COMPILE.parameters,
            },
        }
    ]
    # A base-URL server gets the max_tokens every compatible server understands.
    assert first_request["max_tokens"] == 256
    assert "max_tokens" not in second_request
    assert second_request["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "compile", "arguments": '{"verbose": true}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "ok: 1 kernel"},
    ]


@pytest.mark.parametrize(
    ("raw_arguments", "error_start"),
    [
        ('{"path": "kernel.cu", "content": "unterminated', "arguments are not valid JSON"),
        ("[1, 2]", "arguments must be a JSON object, got an array"),
    ],
)
def test_malformed_tool_call_is_kept_with_a_parse_error_and_sent_back_harmlessly(
    wire_server: WireServer, openai_model: OpenAIModel, raw_arguments: str, error_start: str
) -> None:
    wire_server.script(
        Reply(
            body=openai_completion(
                tool_calls=[openai_tool_call("call_bad", "write_file", raw_arguments)],
                finish_reason="tool_calls",
            )
        ),
        Reply(body=openai_completion(content="Retrying.")),
    )

    first = openai_model.query([UserMessage(text="write it")], [])

    [call] = first.message.tool_calls
    assert call.name == "write_file"
    assert call.arguments is None
    assert call.raw_arguments == raw_arguments
    assert call.parse_error is not None
    assert call.parse_error.startswith(error_start)

    error = ToolResultMessage(
        tool_call_id="call_bad", tool_name="write_file", content=f"error: {call.parse_error}", is_error=True
    )
    openai_model.query([UserMessage(text="write it"), first.message, error], [])

    sent_call = wire_server.requests[1].body["messages"][1]["tool_calls"][0]
    assert sent_call["function"]["arguments"] == "{}"


def test_compatible_server_quirks_missing_ids_empty_arguments_reasoning_and_no_usage(
    wire_server: WireServer,
) -> None:
    tool_call = {"function": {"name": "profile", "arguments": ""}}
    wire_server.script(
        Reply(
            body=openai_completion(
                tool_calls=[tool_call],
                finish_reason="tool_calls",
                model="Qwen/Qwen3-Coder-30B",
                extra_message_fields={"reasoning_content": "Profile first."},
                omit_usage=True,
            )
        )
    )
    client = openai.OpenAI(api_key=TEST_KEY, base_url=f"{wire_server.url}/v1")
    model = OpenAIModel("Qwen/Qwen3-Coder-30B", client)

    response = model.query([UserMessage(text="go")], [])

    assert model.name == f"openai:Qwen/Qwen3-Coder-30B@{wire_server.url}/v1"
    [call] = response.message.tool_calls
    assert call.id.startswith("call_")
    assert (call.name, call.arguments, call.parse_error) == ("profile", {}, None)
    assert response.message.provider_details == {REASONING_CONTENT: "Profile first."}
    assert response.usage == Usage()
    assert response.cost_usd is None


def test_openai_itself_gets_max_completion_tokens() -> None:
    """OpenAI's reasoning models reject max_tokens. No socket here: the SDK's transport is in memory."""
    sent: list[dict[str, object]] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        sent.append(json.loads(request.content))
        return httpx2.Response(200, json=openai_completion(content="hi", model="gpt-6-sol"))

    client = openai.OpenAI(
        api_key=TEST_KEY, http_client=httpx2.Client(transport=httpx2.MockTransport(handle))
    )
    model = OpenAIModel("gpt-6-sol", client)

    model.query([UserMessage(text="hi")], [], max_output_tokens=64)

    assert model.name == "openai:gpt-6-sol"
    assert sent[0]["max_completion_tokens"] == 64
    assert "max_tokens" not in sent[0]

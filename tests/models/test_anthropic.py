"""The Anthropic adapter against the real `anthropic` SDK talking to a local Messages-API server."""

from __future__ import annotations

import pytest

from agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from agent.models.anthropic import OPAQUE_BLOCKS, AnthropicModel, build_request
from tests.models.conftest import TEST_KEY
from tests.models.wire_server import Reply, WireServer, anthropic_message

WRITE_FILE = ToolSpec(
    name="write_file",
    description="Write a file in the workspace.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
)
EPHEMERAL = {"type": "ephemeral"}


def test_text_reply_records_usage_cost_and_raw_payloads(
    wire_server: WireServer, anthropic_model: AnthropicModel
) -> None:
    body = anthropic_message(
        [{"type": "text", "text": "Hello."}],
        usage={
            "input_tokens": 1_000,
            "output_tokens": 2_000,
            "cache_read_input_tokens": 10_000,
            "cache_creation_input_tokens": 4_000,
        },
    )
    wire_server.script(Reply(body=body))

    response = anthropic_model.query([SystemMessage(text="Be brief."), UserMessage(text="Hi")], [])

    assert response.message == AssistantMessage(text="Hello.")
    assert response.stop_reason == "end_turn"
    assert response.model == "claude-sonnet-5-5"
    assert response.usage == Usage(
        input_tokens=1_000, output_tokens=2_000, cache_read_tokens=10_000, cache_write_tokens=4_000
    )
    # claude-sonnet-5-5: $2 in, $10 out, $0.20 cache read, $2.50 cache write per million tokens
    assert response.cost_usd == pytest.approx((1_000 * 2 + 2_000 * 10 + 10_000 * 0.20 + 4_000 * 2.50) / 1e6)
    assert response.attempts == 1
    assert response.raw_response == body
    [request] = wire_server.requests
    assert request.path == "/v1/messages"
    assert request.headers["authorization"] == f"Bearer {TEST_KEY}"
    assert request.body == response.raw_request
    assert request.body == {
        "model": "claude-sonnet-5-5",
        "max_tokens": 16_384,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": EPHEMERAL}]}
        ],
    }


def test_tool_call_round_trip_keeps_thinking_blocks_and_groups_tool_results(
    wire_server: WireServer, anthropic_model: AnthropicModel
) -> None:
    thinking = {"type": "thinking", "thinking": "Write the kernel first.", "signature": "sig-abc123"}
    tool_use = {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "write_file",
        "input": {"path": "kernel.cu", "content": "__global__ void k() {}"},
    }
    wire_server.script(
        Reply(
            body=anthropic_message(
                [thinking, {"type": "text", "text": "Writing."}, tool_use], stop_reason="tool_use"
            )
        ),
        Reply(body=anthropic_message([{"type": "text", "text": "Done."}])),
    )
    conversation = [SystemMessage(text="You write CUDA."), UserMessage(text="Make it fast.")]

    first = anthropic_model.query(conversation, [WRITE_FILE])

    assert first.stop_reason == "tool_use"
    assert first.message.text == "Writing."
    [call] = first.message.tool_calls
    assert (call.id, call.name, call.parse_error) == ("toolu_01", "write_file", None)
    assert call.arguments == {"path": "kernel.cu", "content": "__global__ void k() {}"}
    assert first.message.provider_details == {OPAQUE_BLOCKS: [thinking]}

    conversation += [
        first.message,
        ToolResultMessage(tool_call_id="toolu_01", tool_name="write_file", content="wrote 22 bytes"),
        UserMessage(text="Budget left: 9 turns."),
    ]
    second = anthropic_model.query(conversation, [WRITE_FILE])

    assert second.message.text == "Done."
    first_request, second_request = (request.body for request in wire_server.requests)
    assert first_request["tools"] == [
        {
            "name": "write_file",
            "description": "Write a file in the workspace.",
            "input_schema": WRITE_FILE.parameters,
        }
    ]
    assert second_request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Make it fast."}]},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "Writing."}, tool_use]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "wrote 22 bytes",
                    "is_error": False,
                },
                {"type": "text", "text": "Budget left: 9 turns.", "cache_control": EPHEMERAL},
            ],
        },
    ]


def test_tool_error_result_and_max_output_tokens_reach_the_wire(
    wire_server: WireServer, anthropic_model: AnthropicModel
) -> None:
    wire_server.script(
        Reply(body=anthropic_message([{"type": "text", "text": "Let me"}], stop_reason="max_tokens"))
    )
    call_turn = AssistantMessage.model_validate(
        {"tool_calls": [{"id": "toolu_9", "name": "compile", "arguments": {}, "raw_arguments": "{}"}]}
    )
    messages = [
        UserMessage(text="go"),
        call_turn,
        ToolResultMessage(
            tool_call_id="toolu_9", tool_name="compile", content="kernel.cu:3: error", is_error=True
        ),
    ]

    response = anthropic_model.query(messages, [], max_output_tokens=512)

    assert response.stop_reason == "max_tokens"
    [request] = wire_server.requests
    assert request.body["max_tokens"] == 512
    assert request.body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_9", "name": "compile", "input": {}}],
    }
    assert request.body["messages"][2]["content"][0]["is_error"] is True


def test_empty_assistant_turn_is_dropped_and_neighbouring_user_turns_merge() -> None:
    request = build_request(
        "claude-haiku-4-5",
        [UserMessage(text="a"), AssistantMessage(), UserMessage(text="b")],
        [],
        max_tokens=100,
        prompt_caching=False,
    )
    assert request["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]
    assert "system" not in request
    assert "tools" not in request


def test_unknown_model_has_no_cost(wire_server: WireServer) -> None:
    import anthropic

    wire_server.script(
        Reply(body=anthropic_message([{"type": "text", "text": "hi"}], model="claude-unreleased"))
    )
    model = AnthropicModel(
        "claude-unreleased", anthropic.Anthropic(api_key=TEST_KEY, base_url=wire_server.url)
    )

    response = model.query([UserMessage(text="hi")], [])

    assert response.usage == Usage(input_tokens=10, output_tokens=5)
    assert response.cost_usd is None

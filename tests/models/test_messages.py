from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from agent.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

MESSAGES = TypeAdapter(list[Message])


def test_conversation_round_trips_through_json_by_role() -> None:
    conversation: list[Message] = [
        SystemMessage(text="sys"),
        UserMessage(text="hi"),
        AssistantMessage(
            text="calling",
            tool_calls=[ToolCall.from_raw(id="c1", name="compile", raw_arguments='{"verbose": true}')],
            provider_details={"anthropic_blocks": [{"type": "thinking", "thinking": "t", "signature": "s"}]},
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="compile", content="error: x", is_error=True),
    ]

    restored = MESSAGES.validate_json(MESSAGES.dump_json(conversation))

    assert restored == conversation
    assert [type(message) for message in restored] == [type(message) for message in conversation]


def test_unknown_role_and_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError):
        MESSAGES.validate_python([{"role": "developer", "text": "x"}])
    with pytest.raises(ValidationError):
        MESSAGES.validate_python([{"role": "user", "text": "x", "name": "bob"}])


@pytest.mark.parametrize(
    ("raw", "arguments", "error"),
    [
        ('{"a": 1}', {"a": 1}, None),
        ("", {}, None),
        ("  ", {}, None),
        ('{"a": ', None, "arguments are not valid JSON (Expecting value at line 1 column 7)"),
        ('"text"', None, "arguments must be a JSON object, got a string"),
        ("3", None, "arguments must be a JSON object, got a number"),
        ("null", None, "arguments must be a JSON object, got null"),
    ],
)
def test_tool_call_from_raw(raw: str, arguments: dict[str, int] | None, error: str | None) -> None:
    call = ToolCall.from_raw(id="c", name="t", raw_arguments=raw)

    assert (call.arguments, call.parse_error, call.raw_arguments) == (arguments, error, raw)


def test_usage_adds_up_and_counts_the_whole_prompt() -> None:
    total = Usage(input_tokens=1, output_tokens=2, cache_read_tokens=3) + Usage(
        input_tokens=10, cache_write_tokens=4
    )

    assert total == Usage(input_tokens=11, output_tokens=2, cache_read_tokens=3, cache_write_tokens=4)
    assert total.prompt_tokens == 18

from __future__ import annotations

import pytest

from agent.messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from agent.models.base import Model, ModelError
from agent.models.scripted import (
    ScriptedModel,
    UnexpectedModelCall,
    UnusedModelSteps,
    text_turn,
    tool_call_turn,
)

TOOLS = [ToolSpec(name="compile", description="Build.")]


def test_plays_steps_in_order_and_records_detached_copies_of_each_call() -> None:
    model = ScriptedModel([tool_call_turn("compile", {"verbose": True}, call_id="c1"), text_turn("done")])
    conversation: list[Message] = [UserMessage(text="go")]

    first = model.query(conversation, TOOLS, max_output_tokens=100)
    conversation += [first.message, ToolResultMessage(tool_call_id="c1", tool_name="compile", content="ok")]
    second = model.query(conversation, TOOLS)

    assert isinstance(model, Model)
    assert first.message.tool_calls[0].arguments == {"verbose": True}
    assert first.stop_reason == "tool_use"
    assert second.message.text == "done"
    assert second.stop_reason == "end_turn"
    assert (first.usage, first.cost_usd) == (Usage(), 0.0)
    assert [len(call.messages) for call in model.calls] == [1, 3]
    assert model.calls[0].max_output_tokens == 100
    assert model.calls[0].tools == TOOLS
    model.assert_complete()


def test_a_call_beyond_the_script_raises_and_is_remembered_even_if_caught() -> None:
    model = ScriptedModel([text_turn("only")])
    model.query([UserMessage(text="1")], [])

    with pytest.raises(UnexpectedModelCall, match="call 2 but the script has 1 steps"):
        model.query([UserMessage(text="2")], [])
    with pytest.raises(UnexpectedModelCall, match="beyond its 1 steps"):
        model.assert_complete()


def test_unused_steps_fail_assert_complete() -> None:
    model = ScriptedModel([text_turn("a"), text_turn("b")])
    model.query([UserMessage(text="1")], [])

    with pytest.raises(UnusedModelSteps, match="1 of 2 steps never used"):
        model.assert_complete()


def test_steps_can_compute_replies_raise_errors_and_script_usage() -> None:
    scripted_response = ModelResponse(
        message=AssistantMessage(text="expensive"),
        usage=Usage(input_tokens=1_000, output_tokens=50),
        cost_usd=0.25,
        stop_reason="max_tokens",
        model="scripted",
    )
    model = ScriptedModel(
        [
            lambda messages, tools: text_turn(f"saw {len(messages)} messages and {len(tools)} tools"),
            ModelError("rate limited for good", provider="openai", model="gpt-6-sol", transient=True),
            scripted_response,
            text_turn("cheap"),
        ],
        usage=Usage(input_tokens=10, output_tokens=2),
        cost_usd=0.001,
    )

    assert model.query([UserMessage(text="a")], TOOLS).message.text == "saw 1 messages and 1 tools"
    with pytest.raises(ModelError, match="rate limited"):
        model.query([UserMessage(text="b")], [])
    assert model.query([UserMessage(text="c")], []) is scripted_response
    cheap = model.query([UserMessage(text="d")], [])
    assert (cheap.usage, cheap.cost_usd) == (Usage(input_tokens=10, output_tokens=2), 0.001)
    model.assert_complete()


def test_tool_call_turn_can_script_malformed_arguments() -> None:
    turn = tool_call_turn("write_file", '{"path": ', text="Writing.")

    [call] = turn.tool_calls
    assert turn.text == "Writing."
    assert call.arguments is None
    assert call.raw_arguments == '{"path": '
    assert call.parse_error is not None
    assert tool_call_turn("a").tool_calls[0].id != tool_call_turn("a").tool_calls[0].id

"""A transcript stays about as large as what happened: a 2 MB tool argument sent back on every later
request is stored once, a text past the cap is cut with its size and hash, and the file still gives
back every request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from agent.budget import BudgetLimits
from agent.models import anthropic as anthropic_adapter
from agent.models import openai as openai_adapter
from agent.models.base import Model
from agent.models.replay import ReplayModel
from agent.referee import EvalOptions
from agent.run.context import requests_sent
from agent.run.solve import SolveConfig, solve
from agent.tasks import parse_task
from agent.transcripts.compact import Compactor, Expander
from agent.transcripts.format import ModelResponseEvent, ToolCallEvent, ToolResultEvent
from agent.transcripts.reader import load_transcript, read_transcript
from tests.models.conftest import FAST_RETRY, TEST_KEY
from tests.models.wire_server import (
    Reply,
    WireServer,
    anthropic_message,
    openai_completion,
    openai_tool_call,
)
from tests.run.conftest import RELU_TASK
from tests.run.fakes import FakeReferee

REQUESTS = 6
LINE = '    out[i] = fmaxf(in[i], 0.0f);  // "relu" \\ kept as written, {braces} and tabs\t' + "x" * 940
BIG = "".join(f"{LINE}{n}\n" for n in range(2000))
"""About 2 MB of code-like text (quotes, backslashes, tabs, newlines: JSON escapes them)."""


def tool_turns(provider: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("write_file", {"path": "kernels/big.cu", "content": BIG}),
        *[("list_files", {})] * (REQUESTS - 1),
    ]


def reply(provider: str, turn: int, name: str, arguments: dict[str, Any]) -> Reply:
    call_id = f"call_{turn}"
    if provider == "anthropic":
        block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
        return Reply(body=anthropic_message([block], stop_reason="tool_use"))
    call = openai_tool_call(call_id, name, json.dumps(arguments))
    return Reply(body=openai_completion(tool_calls=[call], finish_reason="tool_calls"))


def make_model(provider: str, url: str) -> Model:
    if provider == "anthropic":
        client = anthropic.Anthropic(api_key=TEST_KEY, base_url=url)
        return anthropic_adapter.AnthropicModel("claude-sonnet-5-5", client, retry=FAST_RETRY)
    return openai_adapter.OpenAIModel(
        "gpt-4o", openai.OpenAI(api_key=TEST_KEY, base_url=f"{url}/v1"), retry=FAST_RETRY
    )


@pytest.fixture
def server() -> Iterator[WireServer]:
    wire = WireServer().start()
    yield wire
    wire.stop()
    assert not wire.unexpected


@pytest.fixture(params=["anthropic", "openai"])
def recorded(request: pytest.FixtureRequest, server: WireServer, tmp_path: Path) -> tuple[str, Path]:
    provider = request.param
    server.script(*[reply(provider, i, *turn) for i, turn in enumerate(tool_turns(provider))])
    model = make_model(provider, server.url)
    config = SolveConfig(
        task=RELU_TASK,
        out=tmp_path / "out",
        model=model.name,
        budget=BudgetLimits(turns=REQUESTS, usd=None, wall=None, gpu=None),
        referee=EvalOptions(arch="sm_90"),
    )
    result = solve(config, model=model, referee=FakeReferee(), task=parse_task(RELU_TASK))
    assert result.status == "budget_exhausted:turns"
    assert len(server.requests) == REQUESTS
    return provider, tmp_path / "out" / "transcript.jsonl"


def test_a_large_argument_sent_back_on_every_request_is_stored_once(recorded: tuple[str, Path]) -> None:
    _, path = recorded
    # The argument goes back in all five later requests (whole in each raw request body).
    assert path.stat().st_size < 3 * len(BIG)


def test_the_file_gives_back_every_call_and_result_whole(recorded: tuple[str, Path]) -> None:
    _, path = recorded
    transcript = read_transcript(path)
    write = transcript.of_type(ToolCallEvent)[0].call
    assert write.name == "write_file" and write.arguments == {"path": "kernels/big.cu", "content": BIG}
    first = transcript.of_type(ModelResponseEvent)[0].response.message.tool_calls[0]
    assert first == write
    assert transcript.of_type(ToolResultEvent)[0].content.startswith("created kernels/big.cu")


def test_the_recorded_conversation_rebuilds_each_request_as_sent(
    recorded: tuple[str, Path], server: WireServer
) -> None:
    """What replay relies on: the conversation in the file, put through the adapter, is each request
    the provider got, byte for byte (raw bodies keep long texts the conversation holds as references)."""
    provider, path = recorded
    transcript = load_transcript(path)
    sent = requests_sent(transcript)  # the 2 MB write passes the context ceiling: its turn is folded
    responses = transcript.of_type(ModelResponseEvent)
    tools = transcript.header.tools
    for n, (messages, response) in enumerate(zip(sent, responses, strict=True)):
        if provider == "anthropic":
            built = anthropic_adapter.build_request("claude-sonnet-5-5", messages, tools, max_tokens=16_384)
        else:
            built = openai_adapter.build_request("gpt-4o", messages, tools, max_tokens_param="max_tokens")
        assert built == server.requests[n].body
        if provider == "openai":  # every long text of these requests is in the conversation: kept whole
            assert response.response.raw_request == server.requests[n].body
    turns = ReplayModel.from_transcript(path).turns
    assert turns == [r.response.message for r in responses]


def test_a_text_past_the_cap_is_cut_with_its_size_and_hash() -> None:
    huge = "y" * (5 * 1024 * 1024)
    line = {"type": "tool_result", "content": huge, "data": {"again": huge}}
    compact = Compactor().event(line)
    assert compact["content"]["chars"] == len(huge)
    assert len(compact["content"]["$truncated"]) < len(huge)
    assert set(compact["data"]["again"]) == {"$text"}  # stored once, even cut
    back = Expander().event(compact)
    assert back["content"].startswith("y" * 1000) and "5242880 characters in all, sha256" in back["content"]
    assert back["data"]["again"] == back["content"]


def test_conversation_values_that_look_like_references_are_kept_as_they_are() -> None:
    line = {"type": "tool_result", "content": "x", "data": {"$text": "abc", "$literal": 1}}
    assert Expander().event(Compactor().event(line)) == line

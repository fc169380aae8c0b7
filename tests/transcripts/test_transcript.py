"""The transcript writer and reader: round trip, a run killed mid-line, corrupt lines, versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.budget import BudgetUsage
from agent.messages import AssistantMessage, ModelResponse, ToolCall, ToolSpec, UserMessage
from agent.transcripts.format import (
    Header,
    ModelRequestEvent,
    ModelResponseEvent,
    RunEndEvent,
    TaskIdentity,
    ToolCallEvent,
    ToolResultEvent,
    TranscriptError,
    TranscriptWriter,
)
from agent.transcripts.reader import read_transcript


def header() -> Header:
    return Header(
        run_id="r1",
        started_at="2026-01-01T00:00:00+00:00",
        task=TaskIdentity(name="t", key="t@abc", sha256="abc", path="/t.py"),
        model="scripted",
        config={"policy": "strict"},
        tools=[ToolSpec(name="verify", description="Verify.")],
        tool_hashes={"verify": "00"},
        prompt_hashes={"system": "11"},
        versions={"python": "3.11"},
        gpu=None,
        sandbox="local",
    )


def write_sample(path: Path) -> None:
    call = ToolCall.from_raw(id="c1", name="verify", raw_arguments="{}")
    ticks = iter(range(100))
    with TranscriptWriter(path, header(), clock=lambda: float(next(ticks))) as writer:
        writer.write(ModelRequestEvent(turn=1, messages=[UserMessage(text="go")], message_count=1))
        response = ModelResponse(
            message=AssistantMessage(tool_calls=[call]),
            model="m",
            raw_request={"messages": [{"role": "user", "content": "go"}]},
            raw_response={"id": "resp-1"},
        )
        writer.write(ModelResponseEvent(turn=1, response=response))
        writer.write(ToolCallEvent(turn=1, call=call))
        writer.write(ToolResultEvent(turn=1, tool_call_id="c1", tool_name="verify", content="ok"))
        writer.write(RunEndEvent(turn=1, status="submitted", usage=BudgetUsage(turns=1)))


def test_round_trip_keeps_every_event_stamped_in_order(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_sample(path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "kernel-agent-transcript"
    assert json.loads(lines[0])["version"] == 1

    transcript = read_transcript(path)
    assert transcript.header == header()
    assert [e.type for e in transcript.events] == [
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "run_end",
    ]
    assert [e.seq for e in transcript.events] == [1, 2, 3, 4, 5]
    assert [e.elapsed_s for e in transcript.events] == [1.0, 2.0, 3.0, 4.0, 5.0]
    response = transcript.of_type(ModelResponseEvent)[0].response
    assert response.raw_response == {"id": "resp-1"}
    assert transcript.ended and not transcript.truncated
    assert [m.role for m in transcript.conversation()] == ["user", "assistant"]


def test_a_line_cut_off_by_a_kill_is_dropped_and_flagged(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_sample(path)
    data = path.read_bytes()
    last_line_start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last_line_start + 25])  # half of the run_end line, no newline

    transcript = read_transcript(path)
    assert transcript.truncated
    assert not transcript.ended
    assert [e.type for e in transcript.events][-1] == "tool_result"


def test_a_complete_last_line_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_sample(path)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    transcript = read_transcript(path)
    assert transcript.ended and not transcript.truncated


@pytest.mark.parametrize(
    ("line_number", "replacement", "complaint"),
    [
        (3, b'{"type": "model_response", "turn": 1', r"t\.jsonl:3: not a valid event: "),
        (4, b'{"type": "tool_call", "turn": "one"}', r"t\.jsonl:4: not a valid event: tool_call\.turn"),
        (
            5,
            b'{"type": "telepathy"}',
            r"t\.jsonl:5: not a valid event: .*does not match any of the expected tags",
        ),
    ],
)
def test_a_corrupt_line_is_an_error_naming_it(
    tmp_path: Path, line_number: int, replacement: bytes, complaint: str
) -> None:
    path = tmp_path / "t.jsonl"
    write_sample(path)
    lines = path.read_bytes().split(b"\n")
    lines[line_number - 1] = replacement
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(TranscriptError, match=complaint):
        read_transcript(path)


@pytest.mark.parametrize(
    ("first_line", "complaint"),
    [
        (b'{"format": "kernel-agent-transcript", "version": 2}', "version 2; this reader knows version 1"),
        (b'{"hello": "world"}', "not a kernel-agent transcript"),
        (b"not json", "the header is not JSON"),
    ],
)
def test_headers_that_cannot_be_read(tmp_path: Path, first_line: bytes, complaint: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(first_line + b"\n")
    with pytest.raises(TranscriptError, match=complaint):
        read_transcript(path)
    with pytest.raises(TranscriptError, match="cannot read"):
        read_transcript(tmp_path / "missing.jsonl")

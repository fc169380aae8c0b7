"""Reading transcripts of older format versions, and damaged files, through load_transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.transcripts.format import ModelResponseEvent, RunEndEvent, TranscriptError
from agent.transcripts.reader import file_version, load_transcript
from tests.transcripts.conftest import V1_TRANSCRIPT


def test_the_committed_version_1_file_loads() -> None:
    assert file_version(V1_TRANSCRIPT) == 1
    transcript = load_transcript(V1_TRANSCRIPT)
    assert transcript.header.task.name == "19_ReLU"
    assert len(transcript.of_type(ModelResponseEvent)) == 8
    assert isinstance(transcript.events[-1], RunEndEvent) and transcript.events[-1].status == "submitted"


def _rewrite(src: Path, dest: Path, change) -> Path:
    lines = [json.loads(line) for line in src.read_text().splitlines()]
    dest.write_text("".join(json.dumps(change(line)) + "\n" for line in lines))
    return dest


def test_an_older_version_is_lifted_by_its_upgrade_function(tmp_path: Path) -> None:
    def as_v0(line: dict) -> dict:
        if line["type"] == "header":
            return {**line, "version": 0}
        if line["type"] == "tool_result":
            return {**{k: v for k, v in line.items() if k != "content"}, "output": line["content"]}
        return line

    def v0_to_v1(line: dict) -> dict:
        if line.get("type") == "tool_result":
            return {**{k: v for k, v in line.items() if k != "output"}, "content": line["output"]}
        return line

    old = _rewrite(V1_TRANSCRIPT, tmp_path / "v0.jsonl", as_v0)
    with pytest.raises(TranscriptError, match="no reader for format version 0"):
        load_transcript(old)
    upgraded = load_transcript(old, upgrades={0: v0_to_v1})
    assert upgraded.header.version == 1
    assert upgraded.events == load_transcript(V1_TRANSCRIPT).events


def test_a_newer_version_is_refused(tmp_path: Path) -> None:
    newer = _rewrite(
        V1_TRANSCRIPT,
        tmp_path / "v9.jsonl",
        lambda line: {**line, "version": 9} if line["type"] == "header" else line,
    )
    with pytest.raises(TranscriptError, match="version 9 is newer"):
        load_transcript(newer)


def test_a_truncated_file_reads_up_to_the_cut(tmp_path: Path) -> None:
    text = V1_TRANSCRIPT.read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(text[: len(text) - 200])
    transcript = load_transcript(cut)
    assert transcript.truncated and not transcript.ended
    assert len(transcript.events) == len(text.splitlines()) - 2


def test_a_corrupt_line_is_named(tmp_path: Path) -> None:
    lines = V1_TRANSCRIPT.read_text().splitlines()
    lines[3] = '{"type": "tool_call", "turn": "x"}'
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TranscriptError, match=r"bad.jsonl:4: not a valid event"):
        load_transcript(bad)

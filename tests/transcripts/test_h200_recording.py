"""The transcripts recorded on the H200 (benchmarks/results/solve-h200/, written by
benchmarks/transcripts_gpu.sh): the reader, `agent show`, `agent export` and the divergence rule
work on the committed evidence, on the CPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from agent.cli.transcripts import export_command, show_command
from agent.transcripts.divergence import compare_runs, observations
from agent.transcripts.reader import load_transcript
from agent.transcripts.show import render
from agent.transcripts.view import build_view
from tests.transcripts.test_show import chromium_dom, needs_chromium

SOLVE_H200 = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "solve-h200"
RECORDED = sorted(SOLVE_H200.glob("*/transcript.jsonl"))
SCRIPTED = SOLVE_H200 / "2_Scale_Bias_Sigmoid_Residual-scripted" / "transcript.jsonl"
TIMED_CALLS = ["profile_1", "profile_2", "submit"]


def test_the_scripted_h200_recording_is_committed() -> None:
    assert SCRIPTED in RECORDED


@pytest.mark.parametrize("path", RECORDED, ids=lambda path: path.parent.name)
def test_the_reader_reads_a_committed_h200_transcript(path: Path) -> None:
    transcript = load_transcript(path)
    assert not transcript.truncated and transcript.ended
    assert transcript.header.gpu is not None and "H200" in transcript.header.gpu
    assert transcript.run_end is not None and transcript.run_end.status == "submitted"
    timed = [o for o in observations(transcript) if o.speedups]
    assert [o.call_id for o in timed] == TIMED_CALLS
    assert all(o.verdict == "correct" and o.speedups["eager"].value > 1.0 for o in timed)


def test_a_committed_h200_transcript_compared_with_itself_matches() -> None:
    recorded = observations(load_transcript(SCRIPTED))
    steps = compare_runs(recorded, recorded)
    assert {s.status for s in steps} == {"match"}
    checked = [s for s in steps if s.speedups]
    assert [s.call_id for s in checked] == TIMED_CALLS
    assert all(c.difference == 0.0 and c.tolerance and c.tolerance > 0 for s in checked for c in s.speedups)


def test_agent_show_renders_the_h200_transcript_in_the_terminal_and_as_html(tmp_path: Path) -> None:
    transcript = load_transcript(SCRIPTED)
    console = Console(record=True, width=140, file=open(os.devnull, "w"))  # noqa: SIM115
    render(build_view(transcript), console)
    text = console.export_text()
    assert "gpu       NVIDIA H200" in text and "turn 11" in text
    assert "bias_value" in text  # the compile error of turn 3
    assert "verdict (profile): correct" in text and "status   submitted" in text
    app = typer.Typer()
    app.command()(show_command)
    page = tmp_path / "h200.html"
    shown = CliRunner().invoke(app, [str(SCRIPTED), "--html", str(page)])
    assert shown.exit_code == 0, shown.output
    html = page.read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert 'id="turn-11"' in html and 'id="run-end"' in html


@needs_chromium
def test_the_h200_transcript_html_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "h200.html"
    app = typer.Typer()
    app.command()(show_command)
    assert CliRunner().invoke(app, [str(SCRIPTED), "--html", str(page)]).exit_code == 0
    dom = chromium_dom(page)
    assert 'id="turn-11"' in dom and 'id="run-end"' in dom and 'class="add"' in dom


def test_agent_export_turns_the_h200_transcripts_into_training_lines(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(export_command)
    chat, steps = tmp_path / "chat.jsonl", tmp_path / "steps.jsonl"
    paths = [str(path) for path in RECORDED]
    done = CliRunner().invoke(app, [*paths, "--format", "openai-chat", "--out", str(chat)])
    assert done.exit_code == 0, done.output
    records = [json.loads(line) for line in chat.read_text().splitlines()]
    assert len(records) == len(RECORDED)
    for record in records:
        calls = [c for m in record["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        assert calls[-1]["function"]["name"] == "submit"
        assert {"compile", "verify", "profile", "submit"} <= {t["function"]["name"] for t in record["tools"]}
    done = CliRunner().invoke(
        app,
        [str(SCRIPTED), "--format", "rl-steps", "--only-faster", "--min-speedup", "1.5", "--out", str(steps)],
    )
    assert done.exit_code == 0, done.output
    by_turn = {s["turn"]: s for s in (json.loads(line) for line in steps.read_text().splitlines())}
    assert len(by_turn) == 11 and by_turn[11]["done"]
    assert by_turn[6]["verdict"] == "correct" and by_turn[6]["reward"] == 1.0  # verify: not timed
    assert by_turn[7]["verdict"] == "correct" and by_turn[7]["reward"] >= 2.0  # faster than eager
    assert by_turn[3]["reward"] is None  # the failed compile is a tool result, not a referee verdict
    (outcome,) = {s["outcome_reward"] for s in by_turn.values()}
    assert outcome >= 2.0  # the run's best solution is faster than eager

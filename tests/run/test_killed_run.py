"""A run killed with SIGKILL mid-run keeps its transcript intact up to the kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.transcripts.format import EvaluationEvent, ModelRequestEvent, ToolCallEvent, ToolResultEvent
from agent.transcripts.reader import read_transcript
from tests.run.conftest import REPO

RUN = """
import sys, time
from pathlib import Path
from agent.models.scripted import tool_call_turn
from agent.tasks import parse_task
from tests.run.conftest import RELU_TASK, run_solve
from tests.run.test_loop import write_turn
from tests.run.fakes import FakeReferee

out, marker = Path(sys.argv[1]), Path(sys.argv[2])

def hang(messages, tools):
    marker.write_text("in turn 3")
    time.sleep(600)

run_solve(out, [write_turn(), tool_call_turn("verify"), hang], parse_task(RELU_TASK), referee=FakeReferee())
"""


@pytest.mark.slow
def test_transcript_of_a_killed_run_is_intact_up_to_the_kill(tmp_path: Path) -> None:
    out, marker = tmp_path / "out", tmp_path / "hanging"
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN, str(out), str(marker)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the scripted run never reached turn 3"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    transcript = read_transcript(out / "transcript.jsonl")
    assert not transcript.ended
    assert not transcript.truncated
    types = [e.type for e in transcript.events]
    assert types[-1] == "model_request"
    assert transcript.of_type(ModelRequestEvent)[-1].turn == 3
    assert len(transcript.of_type(ToolCallEvent)) == len(transcript.of_type(ToolResultEvent)) == 4
    assert transcript.of_type(EvaluationEvent)[0].verdict == "correct"
    assert (out / "workspace" / "model_new.py").is_file()
    assert not (out / "run.json").exists()

"""SIGTERM and SIGHUP end `agent solve` as Ctrl-C does: the transcript's run_end, run.json and
report.md are written, and the closing line names only what exists."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.cli.solve import output_line
from agent.run.signals import interrupt_on_signals
from agent.transcripts.reader import read_transcript
from tests.run.conftest import RELU_TASK, REPO

# `agent solve` itself (agent.cli.app), with the model and the referee replaced: a scripted model whose
# second turn hangs (as a provider that never answers), and the fake referee (no GPU here).
RUN = """
import sys, time
from pathlib import Path
import agent.cli.solve as cli
from agent.models.scripted import ScriptedModel, tool_call_turn
from tests.run.fakes import FakeReferee
from tests.run.test_loop import write_turn

task, out, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])

def hang(messages, tools):
    marker.write_text("waiting")
    time.sleep(600)

cli.make_referee = lambda *, options: FakeReferee()
cli._load_model = lambda *args, **kwargs: ScriptedModel([write_turn(), hang], name="scripted")
sys.argv = ["agent", "solve", task, "--out", out, "--quiet"]
from agent.cli.app import main
main()
"""


def run_until_waiting(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    out, marker = tmp_path / "out", tmp_path / "waiting"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN, str(RELU_TASK), str(out), str(marker)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended before its hanging turn: {proc.communicate()[1][-2000:]}")
        assert time.monotonic() < deadline, "the scripted run never reached its hanging turn"
        time.sleep(0.1)
    return proc, out


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_ends_the_run_with_its_summary_written(tmp_path: Path, signum: signal.Signals) -> None:
    proc, out = run_until_waiting(tmp_path)
    try:
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait(timeout=30)

    assert proc.returncode == 1, stderr[-2000:]
    assert "Traceback" not in stderr
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "interrupted"
    assert signum.name in run["message"]
    assert (out / "report.md").is_file()
    transcript = read_transcript(out / "transcript.jsonl")
    assert transcript.run_end is not None and transcript.run_end.status == "interrupted"
    # Nothing was verified before the signal: no solution/ and no model_new.py, and the line says so.
    assert not (out / "solution").exists() and not (out / "model_new.py").exists()
    assert f"output: {out} (report.md, transcript.jsonl)" in " ".join(stdout.split())


def test_the_closing_line_names_only_what_exists(tmp_path: Path) -> None:
    assert output_line(tmp_path) == f"output: {tmp_path}"
    (tmp_path / "solution").mkdir()
    (tmp_path / "transcript.jsonl").write_text("")
    (tmp_path / "run.json").write_text("{}")
    assert output_line(tmp_path) == f"output: {tmp_path} (solution/, transcript.jsonl)"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_inside_the_guard_a_signal_is_a_keyboard_interrupt_and_the_old_handlers_come_back(
    signum: signal.Signals,
) -> None:
    """What `agent batch` relies on too: its runner records an interrupted batch on KeyboardInterrupt."""
    before = signal.getsignal(signum)
    with pytest.raises(KeyboardInterrupt, match=signum.name), interrupt_on_signals():
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler runs at the next bytecode; never reached
    assert signal.getsignal(signum) == before

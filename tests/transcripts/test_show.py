"""`agent show`: the terminal view and the HTML page (rendered in headless chromium)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from agent.cli.transcripts import show_command
from agent.transcripts.reader import load_transcript
from agent.transcripts.show import render, summarize
from agent.transcripts.show_html import highlight_code, render_html
from agent.transcripts.view import build_view
from tests.transcripts.conftest import V1_TRANSCRIPT


def terminal_text(path: Path) -> str:
    console = Console(record=True, width=140, file=open(os.devnull, "w"))  # noqa: SIM115
    render(build_view(load_transcript(path)), console)
    return console.export_text()


def test_the_terminal_view_has_turns_calls_diffs_verdicts_and_cost() -> None:
    text = terminal_text(V1_TRANSCRIPT)
    assert "turn 1" in text and "turn 8" in text
    assert "assistant: Reading the task first." in text
    assert '→ read_file({"path": "reference.py"})' in text
    assert "+++ b/kernels/relu.cu" in text and "--- /dev/null" in text
    assert "-# FAKE-SPEEDUP: 1.2" in text and "+# FAKE-SPEEDUP: 1.6" in text
    assert "✗ old_string not found in model_new.py" in text
    assert "verdict (profile): correct 1.60x vs eager (best so far)" in text
    assert "status   submitted" in text and "8 turns" in text
    assert '"content"' not in text  # file bodies are shown as diffs, not as JSON arguments


def test_a_killed_run_is_shown_up_to_the_cut(tmp_path: Path) -> None:
    data = V1_TRANSCRIPT.read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(data[: data.index('"turn":7')])
    text = terminal_text(cut)
    assert "cut off mid-write" in text and "unfinished" in text and "turn 6" in text and "turn 7" not in text


def test_the_cli_writes_html_and_names_a_bad_file(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(show_command)
    page = tmp_path / "run.html"
    ok = CliRunner().invoke(app, [str(V1_TRANSCRIPT), "--html", str(page)])
    assert ok.exit_code == 0, ok.output
    html = page.read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert 'id="turn-8"' in html and "FAKE-SPEEDUP: 1.6" in html
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "header"}\n')
    failed = CliRunner().invoke(app, [str(bad)])
    assert failed.exit_code == 2 and "not a kernel-agent transcript" in " ".join(failed.output.split())


def test_code_in_diffs_is_highlighted() -> None:
    cuda = highlight_code("__global__ void relu(float* x) { return; }", "kernels/relu.cu")
    assert "<span" in cuda and "relu" in cuda
    assert highlight_code("a < b", "notes.txt") == "a &lt; b"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (CI installs it with .ci/setup-chromium.sh)"
)


def chromium_dom(page: Path) -> str:
    """The DOM headless chromium built from `page`; fails on a crash or a console error."""
    assert CHROMIUM is not None
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        proc = subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Uncaught" not in proc.stderr and "ERROR:CONSOLE" not in proc.stderr
    return proc.stdout


@needs_chromium
def test_the_html_page_renders_in_headless_chromium_without_errors(tmp_path: Path) -> None:
    page = tmp_path / "run.html"
    page.write_text(render_html(build_view(load_transcript(V1_TRANSCRIPT))), encoding="utf-8")
    dom = chromium_dom(page)
    assert 'id="run-end"' in dom and 'id="turn-8"' in dom
    assert 'class="add"' in dom and 'class="del"' in dom


def test_an_html_file_in_a_missing_folder_is_refused_up_front(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(show_command)
    missing = tmp_path / "missing" / "x.html"
    result = CliRunner().invoke(app, [str(V1_TRANSCRIPT), "--html", str(missing)])
    assert result.exit_code == 2 and "--html" in result.output and "does not exist" in result.output
    assert not missing.parent.exists()
    folder = CliRunner().invoke(app, [str(V1_TRANSCRIPT), "--html", str(tmp_path)])
    assert folder.exit_code == 2 and "is a folder" in folder.output


def test_the_terminal_view_opens_with_the_runs_summary() -> None:
    app = typer.Typer()
    app.command()(show_command)
    result = CliRunner().invoke(app, [str(V1_TRANSCRIPT)], env={"COLUMNS": "140"})
    assert result.exit_code == 0, result.output
    summary = result.output[: result.output.index("turn 1")]
    assert "outcome  submitted" in summary and "best     correct at turn 7" in summary
    assert "1.60x vs eager (faster), 1.44x vs torch.compile (faster)" in summary
    assert "turns    8" in summary and "wall 0.2 s, GPU 4.0 s" in summary


def test_summary_prints_only_the_summary() -> None:
    app = typer.Typer()
    app.command()(show_command)
    result = CliRunner().invoke(app, [str(V1_TRANSCRIPT), "--summary"], env={"COLUMNS": "140"})
    assert result.exit_code == 0, result.output
    assert "1.60x vs eager" in result.output and "$0.0000" in result.output
    assert "turn 1" not in result.output and "read_file" not in result.output


def test_a_killed_runs_summary_is_summed_from_its_events(tmp_path: Path) -> None:
    data = V1_TRANSCRIPT.read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(data[: data.index('"type":"run_end"')].rsplit("\n", 1)[0] + "\n")
    summary = summarize(load_transcript(cut))
    assert summary.outcome.startswith("unfinished")
    assert summary.best_verdict == "correct" and summary.vs_eager is not None
    assert summary.vs_eager.value == pytest.approx(1.6) and summary.turns == 8

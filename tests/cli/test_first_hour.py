"""What a new user meets in a first hour that is not a one-line refusal (those are the bad-input
table, tests/cli/test_bad_input.py): a store another batch is writing, task files Python runs
that look odd, and the output of a run (its status line, its log, `agent show`)."""

from __future__ import annotations

import io
import logging
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from agent.batch.store import Store, StoreLockedError
from tests.cli.bad_input import RELU_SOLUTION, RELU_TASK, REPO, run_agent

# -- a store another writer holds ---------------------------------------------------------------

HOLD_THE_STORE = """
import sys, time
from pathlib import Path
from agent.batch.store import Store
sys.argv = ["agent", "batch", "level1", "--out", "elsewhere"]  # as `agent batch` would run it
store = Store(Path({path!r}))
with store._tx():
    print("holding", flush=True)
    time.sleep(300)
"""


@pytest.fixture
def store_held_by_a_batch(tmp_path: Path):
    """A store whose write lock another `agent batch` process holds (until the test ends)."""
    path = tmp_path / "store.sqlite"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_STORE.format(path=str(path))],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        yield path, holder.pid
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_locked_store_waits_with_a_message_then_says_who_holds_it(
    store_held_by_a_batch: tuple[Path, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, pid = store_held_by_a_batch
    (tmp_path / "tasks" / "level1").mkdir(parents=True)
    (tmp_path / "tasks" / "level1" / RELU_TASK.name).write_bytes(RELU_TASK.read_bytes())
    monkeypatch.setenv("KERNEL_AGENT_STORE_WAIT", "4")
    started = time.monotonic()
    proc = run_agent(
        ["batch", "tasks", "--solutions", str(RELU_SOLUTION.parent), "--store", str(store), "--out", "b"],
        cwd=tmp_path,
    )
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    assert proc.returncode == 2, output
    waiting = f"waiting for the store {store}: another agent batch (pid {pid}) is writing it"
    assert waiting in proc.stderr, output
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {store}: still locked after"), last
    assert f"pid {pid}" in last and "agent batch level1" in last, last
    assert time.monotonic() - started < 100


def test_a_store_locked_by_another_program_says_it_is_not_a_batch(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    Store(path).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    heard: list[str] = []
    try:
        with pytest.raises(StoreLockedError) as refused:
            Store(path, busy_timeout_s=3, on_wait=heard.append)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert heard == [
        f"waiting for the store {path}: another process holds its write lock (not an agent batch: no writer record)"
    ]
    assert "still locked after" in str(refused.value) and "not an agent batch" in str(refused.value)
    assert not (tmp_path / "store.sqlite.writer").exists()


def test_a_store_leaves_no_writer_record_after_its_writes(tmp_path: Path) -> None:
    with Store(tmp_path / "store.sqlite") as store:
        store.add_tasks([])
    assert sorted(p.name for p in tmp_path.iterdir() if "writer" in p.name) == []


# -- task files Python runs -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_task_with_a_byte_order_mark_loads_as_python_runs_it(tmp_path: Path) -> None:
    from agent.tasks import parse_task

    task = tmp_path / "19_ReLU.py"
    task.write_bytes(b"\xef\xbb\xbf" + RELU_TASK.read_bytes())
    assert parse_task(task).name == "19_ReLU"
    proc = run_agent(["tasks", str(task), "--json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"float32"' in proc.stdout and '"errors": []' in proc.stdout


# -- a run's output ---------------------------------------------------------------------------------


def _context(turn: int = 3, wall: float = 65.0) -> SimpleNamespace:
    """What status_line reads of a run's ToolContext."""
    from agent.budget import BudgetLimits, BudgetUsage

    usage = BudgetUsage(turns=turn, in_tokens=123_456, out_tokens=7_890, usd=1.23, wall=wall, gpu=12.0)
    budget = SimpleNamespace(usage=lambda: usage, limits=BudgetLimits())
    best = SimpleNamespace(speedup=1.42)
    return SimpleNamespace(
        turn=turn, budget=budget, candidates=SimpleNamespace(best=best, baseline="compile")
    )


def test_the_status_line_at_80_columns_keeps_the_action() -> None:
    from agent.run.progress import status_line

    action = "compile: error (kernels/fused_gemm_bias_relu.cu)"
    line = status_line(_context(), action, width=80)  # type: ignore[arg-type]
    assert len(line) <= 80 and line.endswith(action), line
    assert line.startswith("turn 3/40"), line
    wide = status_line(_context(), action, width=200)  # type: ignore[arg-type]
    assert "tokens" in wide and "$1.23" in wide and "best: 1.42x" in wide
    assert "gpu" in wide and "wall" in wide and wide.endswith(action)


def test_logs_without_a_terminal_say_a_line_once(caplog: pytest.LogCaptureFixture) -> None:
    from agent.run.progress import LogProgress

    progress = LogProgress()
    with caplog.at_level(logging.INFO, logger="agent.run.solve"):
        for _ in range(5):
            progress(_context(), "write_file: ok")  # type: ignore[arg-type]
        progress(_context(), "compile: ok")  # type: ignore[arg-type]
        progress(_context(turn=4), "compile: ok")  # type: ignore[arg-type]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].endswith("write_file: ok") and lines[1].endswith("compile: ok")


def test_a_batch_log_says_a_note_once() -> None:
    from agent.batch.progress import LogProgress

    out = io.StringIO()
    progress = LogProgress(Console(file=out, width=80))
    for _ in range(3):
        progress.note("provider outage: waiting 30s before the next attempt")
    progress.note("resumed")
    assert out.getvalue().splitlines() == ["provider outage: waiting 30s before the next attempt", "resumed"]


def _rendered(renderable: object) -> str:
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(renderable)
    return out.getvalue()


def test_a_dry_runs_profile_is_not_shown_as_a_failure() -> None:
    from agent.tools.pipeline import DRY_RUN_NOTE
    from agent.transcripts.show import _step
    from agent.transcripts.view import DRY_RUN_MARK, ToolStepView

    assert DRY_RUN_MARK in DRY_RUN_NOTE
    dry = ToolStepView(
        call_id="c1",
        name="profile",
        arguments="",
        result=f"up to date (nothing changed) in 0.0s for sm_90\n{DRY_RUN_NOTE}",
        is_error=True,
        answered=True,
    )
    shown = _rendered(_step(dry, full=False))
    assert "up to date" in shown and "✗" not in shown
    failed = dry.model_copy(update={"result": "compile failed (compile_error)"})
    assert "✗ compile failed" in _rendered(_step(failed, full=False))


def test_show_caps_a_long_diff_and_says_how_to_see_it_all() -> None:
    from agent.transcripts.show import _step
    from agent.transcripts.view import ToolStepView

    diff = "\n".join(["--- a/k.cu", "+++ b/k.cu", *[f"+line {i}" for i in range(500)]])
    step = ToolStepView(
        call_id="c1", name="write_file", arguments="", path="k.cu", diff=diff, result="created", answered=True
    )
    short = _rendered(_step(step, full=False))
    assert "... 442 more lines (use --full)" in short
    assert len(short.splitlines()) < 80
    assert "+line 499" in _rendered(_step(step, full=True))


def test_show_opens_with_the_summary(tmp_path: Path) -> None:
    proc = run_agent(["show", str(REPO / "tests" / "transcripts" / "data" / "v1_relu.jsonl")], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("╭─ summary"), proc.stdout[:400]
    assert "outcome" in "\n".join(proc.stdout.splitlines()[:4])


def test_a_failed_build_prints_each_error_once(tmp_path: Path) -> None:
    solution = tmp_path / "ws"
    solution.mkdir()
    for path in RELU_SOLUTION.rglob("*"):
        if path.is_file():
            (solution / path.relative_to(RELU_SOLUTION)).parent.mkdir(parents=True, exist_ok=True)
            (solution / path.relative_to(RELU_SOLUTION)).write_bytes(path.read_bytes())
    (solution / "model_new.py").write_text("import torch\n\nclass ModelNew(:\n    pass\n")
    proc = run_agent(["compile", str(solution)], cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert output.count("SyntaxError") == 1, output
    assert proc.stderr.strip() == f"error: the build failed: 1 error at {solution}/model_new.py:3:16 (above)"


@pytest.mark.slow
def test_a_run_whose_sandbox_is_refused_leaves_no_output_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox refuses after the output folder and workspace were made (docker without its
    image or GPU runtime does): the folders this run made are gone, the user's are kept."""
    from typer.testing import CliRunner

    import agent.cli.solve
    import agent.run.solve
    from agent.cli.app import app
    from sandbox.base import SandboxError
    from tests.run.fakes import FakeReferee

    def refuse(*args: object, **kwargs: object) -> None:
        raise SandboxError("docker sandbox: the GPU runtime is missing")

    monkeypatch.setattr(agent.cli.solve, "make_referee", lambda **options: FakeReferee(gpu=None))
    monkeypatch.setattr(agent.run.solve, "open_sandbox", refuse)
    (tmp_path / "mine").mkdir()
    out = tmp_path / "mine" / "new" / "run"
    transcript = REPO / "tests" / "transcripts" / "data" / "v1_relu.jsonl"
    args = ["solve", str(RELU_TASK), "--model", f"replay:{transcript}", "--allow-no-gpu", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--quiet"])
    assert result.exit_code == 2, result.output
    assert "the GPU runtime is missing" in result.output
    assert not (tmp_path / "mine" / "new").exists()
    assert (tmp_path / "mine").is_dir()

"""The harness of the bad-input table: run `agent ...` as a user would (a fresh process, no GPU
visible, piped output) and check what a user relies on when they get an input wrong."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
RELU_SOLUTION = REPO / "benchmarks" / "solutions" / "level1" / "19_ReLU"
TRANSCRIPT = REPO / "tests" / "transcripts" / "data" / "v1_relu.jsonl"
# Commands that fail on their input must say so before any slow step; none of these cases builds.
CASE_TIMEOUT_S = 120

Setup = Callable[[Path], None]


@dataclass(frozen=True)
class Case:
    """`agent ARGS...` (with {tmp} for the case's folder, {task}, {solution}, {transcript} for our
    fixtures) must exit with `code` and print one error line that contains `names`."""

    id: str
    args: list[str]
    names: str
    code: int = 2
    setup: Setup | None = None
    absent: list[str] = field(default_factory=list)
    """Paths (with {tmp}) that must not exist afterwards: nothing created where the user did not ask."""


def fill(args: list[str], tmp: Path) -> list[str]:
    values = {
        "tmp": str(tmp),
        "task": str(RELU_TASK),
        "solution": str(RELU_SOLUTION),
        "transcript": str(tmp / "run" / "transcript.jsonl"),
    }
    return [arg.format(**values) for arg in args]


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under root (and its hash): what must be unchanged after a refused command."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run_agent(
    args: list[str], cwd: Path, timeout: float = CASE_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "80", "PYTHONWARNINGS": ""}
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def check(case: Case, tmp: Path) -> None:
    (tmp / "run").mkdir()
    shutil.copy(TRANSCRIPT, tmp / "run" / "transcript.jsonl")
    if case.setup is not None:
        case.setup(tmp)
    before = tree_digest(tmp)
    proc = run_agent(fill(case.args, tmp), cwd=tmp)
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    assert proc.returncode == case.code, f"exit {proc.returncode}, expected {case.code}:\n{output}"
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{proc.stderr}"
    assert fill([case.names], tmp)[0] in lines[0], f"the line does not name {case.names!r}: {lines[0]}"
    after = tree_digest(tmp)
    changed = [name for name, digest in before.items() if after.get(name) != digest]
    assert not changed, f"pre-existing files changed or removed: {changed}"
    for path in fill(case.absent, tmp):
        assert not Path(path).exists(), f"{path} was created"


# Fixtures the cases set up in their own folder.


def empty_dir(name: str) -> Setup:
    return lambda tmp: (tmp / name).mkdir()


def write(name: str, content: bytes | str) -> Setup:
    def setup(tmp: Path) -> None:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)

    return setup


def both(*setups: Setup) -> Setup:
    def setup(tmp: Path) -> None:
        for one in setups:
            one(tmp)

    return setup


def sqlite_file(name: str, *, truncate_to: int | None = None) -> Setup:
    """A real SQLite file with one table (optionally cut short)."""

    def setup(tmp: Path) -> None:
        path = tmp / name
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
            db.executemany("INSERT INTO notes (text) VALUES (?)", [("x" * 500,)] * 200)
        db.close()
        if truncate_to is not None:
            data = path.read_bytes()
            path.write_bytes(data[:truncate_to])

    return setup


def copy_solution(name: str) -> Setup:
    return lambda tmp: shutil.copytree(RELU_SOLUTION, tmp / name)


def broken_model_new(name: str) -> Setup:
    def setup(tmp: Path) -> None:
        shutil.copytree(RELU_SOLUTION, tmp / name)
        (tmp / name / "model_new.py").write_text("import torch\n\nclass ModelNew(:\n    pass\n")

    return setup


def tasks_folder(name: str) -> Setup:
    def setup(tmp: Path) -> None:
        folder = tmp / name / "level1"
        folder.mkdir(parents=True)
        shutil.copy(RELU_TASK, folder / RELU_TASK.name)

    return setup


def truncated_transcript(name: str) -> Setup:
    def setup(tmp: Path) -> None:
        lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
        (tmp / name).write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])

    return setup

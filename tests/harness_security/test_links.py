"""Links, hard links, FIFOs and sockets that code in the sandbox leaves in the workspace, the build
cache or an output folder: the harness never reads, writes or chmods through them. Each case sets
the trap with the product's own functions, then checks that the victims outside are unchanged
(by hash and mode), that no secret reaches a snapshot or an export, and that the user is told in
one line what was skipped."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.budget import Budget, BudgetLimits
from agent.build.compile import compile_solution
from agent.referee.processes import read_record
from agent.run.loop import LoopOutcome
from agent.run.solve import write_outputs
from agent.tasks import Task, parse_task
from agent.tools.candidates import CandidateBook
from agent.workspace import Workspace
from sandbox import safe_files
from sandbox.base import ExecResult
from sandbox.local import LocalSandbox
from sandbox.safe_files import SkippedEntry, read_regular
from tests.run.fakes import FakeReferee

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "benchmarks" / "tasks" / "level1" / "19_ReLU.py"
CANARY = "sk-ant-canary-3c1e9b7d5a"
MODEL_NEW = (
    "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
)


@pytest.fixture
def task() -> Task:
    return parse_task(RELU_TASK)


@pytest.fixture
def workspace(tmp_path: Path, task: Task) -> Workspace:
    ws = Workspace.create(tmp_path / "ws", task)
    (ws.root / "model_new.py").write_text(MODEL_NEW)
    (ws.root / "kernels" / "relu.cu").write_text("__global__ void relu() {}\n")
    return ws


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder of the user's that the sandbox must not reach, with a secret in it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.env").write_text(f"ANTHROPIC_API_KEY={CANARY}\n")
    (folder / "victim.txt").write_text("the user's file\n")
    (folder / "victim.txt").chmod(0o600)
    return folder


def fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """relative path -> (sha256, mode) of every entry under `folder`, links not followed."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(info.st_mode) else ""
        found[path.relative_to(folder).as_posix()] = (digest, info.st_mode)
    return found


def all_text(folder: Path) -> str:
    """Everything readable under `folder` as the user would open it (links not followed)."""
    chunks = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            chunks.append(path.read_bytes().decode(errors="replace"))
    return "\n".join(chunks)


@pytest.fixture
def canary_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A process whose /proc/<pid>/environ holds the canary key, as the harness's own would."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=dict(os.environ))
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def export(tmp_path: Path, task: Task, ws: Workspace) -> Path:
    """Judge the workspace (a fake verdict) and write the output folder as `agent solve` does."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    book = CandidateBook(baseline="eager")
    result = FakeReferee().evaluate(task, ws, sandbox=None, profile=False)  # type: ignore[arg-type]
    book.record(turn=1, source="submit", result=result, snapshot=ws.snapshot(), gpu_s=0.0)
    book.submitted = book.best
    write_outputs(
        out, task, ws, book, Budget(BudgetLimits()), LoopOutcome(status="submitted", message="done")
    )
    return out


def test_a_kernel_linked_to_proc_environ_never_reaches_a_snapshot(
    workspace: Workspace, canary_process: int
) -> None:
    link = workspace.root / "kernels" / "a.cu"
    link.symlink_to(f"/proc/{canary_process}/environ")
    assert CANARY in link.read_bytes().decode(errors="replace")  # the trap is real

    snap = workspace.snapshot()

    assert "kernels/a.cu" not in snap.files
    assert snap.skipped == ["kernels/a.cu: skipped (a symbolic link)"]
    assert CANARY not in snap.model_dump_json()
    assert CANARY not in all_text(workspace.root / ".harness")


def test_a_kernel_linked_to_a_file_outside_is_neither_snapshotted_nor_exported(
    tmp_path: Path, task: Task, workspace: Workspace, outside: Path
) -> None:
    (workspace.root / "kernels" / "leak.cu").symlink_to(outside / "secret.env")
    before = fingerprint(outside)

    out = export(tmp_path, task, workspace)

    assert CANARY not in all_text(out)
    assert not (out / "solution" / "kernels" / "leak.cu").exists()
    assert (out / "solution" / "kernels" / "relu.cu").is_file()
    assert fingerprint(outside) == before


def test_export_copies_nothing_of_a_linked_folder(tmp_path: Path, task: Task, workspace: Workspace) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "shadow").write_text(f"root:{CANARY}:19000:0:99999:7:::\n")
    (workspace.root / "kernels" / "etcdir").symlink_to(etc)

    out = export(tmp_path, task, workspace)

    assert not (out / "solution" / "kernels" / "etcdir").exists()
    assert CANARY not in all_text(out)
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "submitted"


def test_restoring_harness_files_replaces_a_linked_binding_and_leaves_its_target_alone(
    workspace: Workspace, outside: Path
) -> None:
    binding = workspace.root / "binding.cpp"
    binding.unlink()
    binding.symlink_to(outside / "victim.txt")
    before = fingerprint(outside)

    changed = workspace.restore_harness_files()

    assert "binding.cpp" in changed
    assert fingerprint(outside) == before  # neither overwritten nor chmodded
    assert not binding.is_symlink() and binding.is_file()
    assert "PYBIND11_MODULE" in binding.read_text()
    assert not binding.stat().st_mode & 0o222


def test_linked_reference_files_are_replaced_never_read_or_written(
    workspace: Workspace, outside: Path, task: Task
) -> None:
    reference = workspace.root / "reference.py"
    reference.unlink()
    reference.symlink_to(outside / "victim.txt")
    saved = workspace.root / ".harness" / "reference.py"
    saved.unlink()
    saved.symlink_to(outside / "secret.env")
    before = fingerprint(outside)

    workspace.restore_harness_files()  # the saved copy is a link: it is not taken as the task

    assert fingerprint(outside) == before
    assert CANARY not in reference.read_text(errors="replace")
    workspace.restore_harness_files(task_source=task.source)
    assert reference.read_text() == task.source and not reference.is_symlink()
    assert saved.read_text() == task.source and not saved.is_symlink()
    assert fingerprint(outside) == before


def test_a_linked_harness_folder_is_neither_read_nor_written(workspace: Workspace, outside: Path) -> None:
    harness = workspace.root / ".harness"
    (outside / "workspace.json").write_text(json.dumps({"template": "../../../outside"}))
    shutil.rmtree(harness)
    harness.symlink_to(outside)
    before = fingerprint(outside)

    snap = workspace.snapshot()

    assert snap.files["model_new.py"] == MODEL_NEW
    assert workspace.template == "cuda-extension"  # the planted manifest is not read
    assert not workspace.is_harness_made()
    assert fingerprint(outside) == before


class _CrashingBuildSandbox(LocalSandbox):
    """A local sandbox whose build worker dies at once: the harness still saves the log."""

    def exec(self, *args: object, **kwargs: object) -> ExecResult:
        return ExecResult(returncode=1, stderr="nvcc: fatal error\n")


def test_the_compile_log_is_not_written_through_a_linked_logs_folder(
    workspace: Workspace, outside: Path, tmp_path: Path
) -> None:
    (workspace.root / ".harness" / "logs").symlink_to(outside)
    before = fingerprint(outside)
    sandbox = _CrashingBuildSandbox(workspace=workspace.root, cache_dir=tmp_path / "cache", isolation="none")
    try:
        result = compile_solution(workspace, sandbox, arch="9.0", timeout=30)
    finally:
        sandbox.close()

    assert not result.ok and result.status == "crashed"
    assert result.log_path is None
    assert fingerprint(outside) == before


def test_a_linked_snapshot_store_is_neither_written_nor_loaded(workspace: Workspace, outside: Path) -> None:
    planted = {"content_hash": "ab" * 32, "files": {"kernels/x.cu": CANARY}}
    (outside / f"{'ab' * 32}.json").write_text(json.dumps(planted))
    (workspace.root / ".harness" / "snapshots").symlink_to(outside)
    before = fingerprint(outside)

    snap = workspace.snapshot()

    assert fingerprint(outside) == before
    with pytest.raises(Exception, match="no single snapshot matches"):
        workspace.load_snapshot("abab")
    with pytest.raises(Exception, match="no single snapshot matches"):
        workspace.load_snapshot(snap.content_hash[:8])


def test_the_build_stamp_is_never_written_or_read_through_a_link(tmp_path: Path, outside: Path) -> None:
    ws_root = tmp_path / "ws"
    ws_root.mkdir()
    sandbox = LocalSandbox(workspace=ws_root, cache_dir=tmp_path / "cache", isolation="none")
    try:
        build = Path(sandbox.cache_path) / "build" / "0123"
        build.mkdir(parents=True)
        stamp = build / ".kernel-agent-built.json"
        stamp.symlink_to(outside / "victim.txt")
        (Path(sandbox.cache_path) / "build" / "linked").symlink_to(outside)
        before = fingerprint(outside)

        with pytest.raises(PermissionError, match="not read: a symbolic link"):
            sandbox.get_file(str(stamp))
        sandbox.put_file(str(stamp), b'{"content_hash": "x"}')
        with pytest.raises(PermissionError, match="build/linked: a symbolic link, not a folder"):
            sandbox.put_file(f"{sandbox.cache_path}/build/linked/.kernel-agent-built.json", b"{}")

        assert fingerprint(outside) == before
        assert not stamp.is_symlink() and sandbox.get_file(str(stamp)) == b'{"content_hash": "x"}'
    finally:
        sandbox.close()


def test_restoring_a_snapshot_replaces_a_linked_model_entry(workspace: Workspace, outside: Path) -> None:
    snap = workspace.snapshot()
    entry = workspace.root / "model_new.py"
    entry.unlink()
    entry.symlink_to(outside / "secret.env")
    before = fingerprint(outside)

    assert "model_new.py" not in workspace.model_files()
    workspace.restore(snap)

    assert fingerprint(outside) == before
    assert not entry.is_symlink() and entry.read_text() == MODEL_NEW


def test_a_hard_link_to_a_file_outside_is_not_read_and_not_written(
    workspace: Workspace, outside: Path
) -> None:
    snap = workspace.snapshot()
    hard = workspace.root / "kernels" / "relu.cu"
    hard.unlink()
    os.link(outside / "secret.env", hard)
    before = fingerprint(outside)

    skipped: list[SkippedEntry] = []
    files = workspace.model_files(skipped)
    workspace.restore(snap)

    assert "kernels/relu.cu" not in files
    assert [entry.line() for entry in skipped] == [
        "kernels/relu.cu: skipped (a hard link (2 names for one file))"
    ]
    assert fingerprint(outside) == before
    assert hard.read_text() == "__global__ void relu() {}\n" and hard.stat().st_nlink == 1


def test_a_fifo_in_kernels_never_blocks_a_snapshot_or_an_export(
    tmp_path: Path, task: Task, workspace: Workspace
) -> None:
    os.mkfifo(workspace.root / "kernels" / "pipe.cu")
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(export(tmp_path, task, workspace)), daemon=True)
    worker.start()
    worker.join(timeout=20)

    assert done, "the snapshot or the export blocked on a FIFO"
    assert not (tmp_path / "out" / "solution" / "kernels" / "pipe.cu").exists()
    assert workspace.snapshot().skipped == ["kernels/pipe.cu: skipped (a FIFO)"]


def test_a_socket_in_kernels_is_skipped_with_one_line(tmp_path: Path, workspace: Workspace) -> None:
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(workspace.root / "kernels" / "sock.cu"))
        copy = tmp_path / "copy"
        skipped: list[SkippedEntry] = []
        workspace.copy_to(copy, skipped=skipped)
    finally:
        server.close()

    assert [entry.line() for entry in skipped] == ["kernels/sock.cu: skipped (a socket)"]
    assert not (copy / "kernels" / "sock.cu").exists()
    assert (copy / "kernels" / "relu.cu").read_text() == "__global__ void relu() {}\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root (CAP_MKNOD)")
def test_a_device_node_in_kernels_is_never_opened(tmp_path: Path, task: Task, workspace: Workspace) -> None:
    """A character device with /dev/zero's numbers: reading it would never end."""
    os.mknod(workspace.root / "kernels" / "zero.cu", 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(export(tmp_path, task, workspace)), daemon=True)
    worker.start()
    worker.join(timeout=20)

    assert done, "the snapshot or the export read a device node"
    assert not (tmp_path / "out" / "solution" / "kernels" / "zero.cu").exists()
    assert len(workspace.snapshot().skipped) == 1
    assert workspace.snapshot().skipped[0].startswith("kernels/zero.cu: skipped")


def test_a_link_swapped_in_after_the_check_is_refused_on_open(
    workspace: Workspace, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = workspace.root / "kernels" / "relu.cu"
    checked = safe_files._entry_mode

    def check_then_swap(dir_fd: int, name: str) -> int | None:
        mode = checked(dir_fd, name)  # a regular file when checked...
        if name == "relu.cu":
            target.unlink()  # ...and a link by the time it is opened
            target.symlink_to(outside / "secret.env")
        return mode

    monkeypatch.setattr(safe_files, "_entry_mode", check_then_swap)
    skipped: list[SkippedEntry] = []

    assert read_regular(workspace.root, "kernels/relu.cu", skipped) is None
    assert [entry.line() for entry in skipped] == [
        "kernels/relu.cu: skipped (replaced by a link while being opened)"
    ]


def test_a_planted_link_in_the_output_folder_is_replaced_not_written_through(
    tmp_path: Path, task: Task, workspace: Workspace, outside: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for name in ("report.md", "run.json", "result.json", "model_new.py"):
        (out / name).symlink_to(outside / "victim.txt")
    before = fingerprint(outside)

    export(tmp_path, task, workspace)

    assert fingerprint(outside) == before
    for name in ("report.md", "run.json", "result.json", "model_new.py"):
        assert not (out / name).is_symlink() and (out / name).is_file(), name


def test_a_fifo_or_link_as_the_candidates_record_is_refused_promptly(tmp_path: Path, outside: Path) -> None:
    exchange = tmp_path / "ws" / ".referee" / "run1"
    exchange.mkdir(parents=True)
    os.mkfifo(exchange / "result.json")
    found: list[tuple[object, str, bool]] = []
    reader = threading.Thread(
        target=lambda: found.append(read_record(exchange / "result.json", b"k" * 32, "run1")), daemon=True
    )
    reader.start()
    reader.join(timeout=10)
    assert found, "reading the candidate's record blocked on a FIFO"
    assert found[0][0] is None and found[0][2] is True

    (exchange / "result.json").unlink()
    (exchange / "result.json").symlink_to(outside / "secret.env")
    record, problem, forged = read_record(exchange / "result.json", b"k" * 32, "run1")
    assert record is None and forged and CANARY not in problem

"""Supervision plumbing: authenticated records, seeds, the judge process, stderr trimming."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.referee.processes import JudgeProcess, Seeds, open_exchange, read_record, stderr_tail
from agent.workspace import SingleFileSolution
from sandbox.base import open_sandbox

KEY = b"k" * 32


def write_record(path: Path, body: dict, key: bytes = KEY, mac: str | None = None) -> None:
    payload = json.dumps(body)
    mac = mac if mac is not None else hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    path.write_text(json.dumps({"body": payload, "mac": mac}))


def test_a_signed_record_of_this_run_is_accepted(tmp_path: Path) -> None:
    write_record(tmp_path / "r.json", {"run_id": "abc", "done": True})
    body, problem, forged = read_record(tmp_path / "r.json", KEY, "abc")
    assert body == {"run_id": "abc", "done": True} and problem == "" and not forged


def test_forged_replayed_malformed_and_missing_records_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_record(path, {"run_id": "abc", "done": True}, key=b"x" * 32)
    assert read_record(path, KEY, "abc") == (
        None,
        "its completion record failed authentication (forged)",
        True,
    )
    write_record(path, {"run_id": "old", "done": True})
    assert read_record(path, KEY, "abc")[1:] == (
        "its completion record belongs to another run (replayed)",
        True,
    )
    path.write_text('{"done": true}')
    assert read_record(path, KEY, "abc")[2] is True
    path.unlink()
    assert read_record(path, KEY, "abc") == (None, "it left no completion record", False)


def test_seeds_are_fresh_every_time() -> None:
    a, b = Seeds.fresh(5), Seeds.fresh(5)
    assert len(set(a.trials)) == 5 and a.trials != b.trials and a.state != b.state


def test_exchange_folder_is_private_and_cleaned(tmp_path: Path) -> None:
    solution_file = tmp_path / "sol.py"
    solution_file.write_text("ModelNew = None\n")
    with open_sandbox("local", workspace=tmp_path) as box:
        exchange = open_exchange(SingleFileSolution(solution_file), box)
    assert exchange.host_dir.is_dir() and (exchange.host_dir.stat().st_mode & 0o777) == 0o700
    assert exchange.box_dir.endswith(exchange.run_id)
    exchange.cleanup()
    assert not exchange.host_dir.exists() and not exchange.host_dir.parent.exists()


def test_an_abandoned_judge_is_gone_and_a_fed_one_answers() -> None:
    judge = JudgeProcess()
    judge.abandon()
    assert judge.proc.poll() is not None
    start = time.monotonic()
    judge = JudgeProcess()
    result, _ = judge.run({"bogus": True}, timeout=120)
    assert time.monotonic() - start < 120
    assert result is not None and result["ok"] is False
    failure = result["failure"]
    assert failure is not None and "KeyError" in failure["message"]


def test_stderr_tail_drops_profiler_chatter() -> None:
    text = "USDT:2026 profiler_start\nTraceback (most recent call last):\nERROR:2026 gpuGetDeviceCount\nValueError: x\n"
    assert stderr_tail(text) == "Traceback (most recent call last):\nValueError: x"


HOST = """
import json, sys, time
from agent.paths import cache_dir
from agent.referee.processes import JudgeProcess

# The judge is confined: the one place it may write is its torch.compile cache.
mark = cache_dir() / "referee" / "inductor" / "judging"
judge = JudgeProcess(device="cpu")
task = "import time\\nMARK = open(%r, 'w').write('judging')\\ntime.sleep(300)\\n" % str(mark)
spec = {"device": "cpu", "task_source": task, "task_filename": "task.py", "init_seed": 1}
judge.proc.stdin.write((json.dumps(spec) + "\\n").encode())
judge.proc.stdin.flush()
print(judge.proc.pid, flush=True)
print(mark, flush=True)
time.sleep(300)
"""


@pytest.mark.slow
def test_a_judge_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """Killing a batch or `agent eval` must not leave its judges running baselines on the GPU
    (the judge has a session of its own, so the host's process group does not reach it)."""
    env = {**os.environ, "KERNEL_AGENT_CACHE": str(tmp_path / "cache")}
    host = subprocess.Popen(
        [sys.executable, "-c", HOST], stdout=subprocess.PIPE, cwd=Path(__file__).parents[2], env=env
    )
    try:
        assert host.stdout is not None
        judge_pid = int(host.stdout.readline())
        mark = Path(host.stdout.readline().decode().strip())
        deadline = time.monotonic() + 120
        while not mark.exists() and time.monotonic() < deadline:  # it imported torch and is working
            time.sleep(0.2)
        assert mark.exists(), "the judge never started on its spec"
        judges = [judge_pid, *descendants(judge_pid)]  # bubblewrap and the judge inside it
        assert all(alive(pid) for pid in judges)
    finally:
        host.kill()
        host.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in judges) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in judges), "the judge outlived the process that started it"


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        for child in (task / "children").read_text().split():
            found += [int(child), *descendants(int(child))]
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_judge_started_after_its_parent_died_exits_but_a_launcher_between_them_is_fine() -> None:
    from sandbox.base import WORKERS_DIR

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import siblings; from lifetime import die_with_parent; "
    )
    probe += "die_with_parent(int(sys.argv[2])); print('running')"
    orphan = subprocess.run(
        [sys.executable, "-c", probe, str(WORKERS_DIR), str(gone.pid)], capture_output=True, text=True
    )
    assert orphan.returncode == 1 and orphan.stdout == ""
    # Started through a shell: its parent is the shell, the named one (this process) lives on.
    shell = f'{sys.executable} -c "{probe}" {WORKERS_DIR} {os.getpid()}; true'
    launched = subprocess.run(["/bin/sh", "-c", shell], capture_output=True, text=True)
    assert launched.stdout == "running\n", launched.stderr

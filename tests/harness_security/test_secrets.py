"""A provider key set in the harness's environment reaches nothing the model, a sandboxed process
or the output folder can see: a hostile model with the shell tool tries every way it has (the
sandbox's environment, /proc, links the harness might read through, a folder link to export),
then the run's transcript is replayed with the key still set."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.messages import AssistantMessage, ToolCall
from agent.run.replay import replay_run
from agent.tasks import parse_task
from tests.run.conftest import RELU_TASK, relu_files, run_solve
from tests.run.fakes import FakeReferee

CANARY = "sk-ant-api03-canary-9d41e6b7a2c5"

PROBES = (
    "env; cat /proc/self/environ; cat /proc/1/environ; cat /proc/$PPID/environ; "
    "ls -la /root /home ~ 2>&1; cat /etc/shadow 2>&1 | head -2; "
    "ln -s /proc/self/environ kernels/env.cu; ln -s /proc/1/environ kernels/env1.cuh; "
    "ln -s /etc kernels/etcdir; ln -s / kernels/root; mkfifo kernels/fifo.h; "
    "ln -s /proc/self/environ kernels/tune.json; true"
)


def _call(tag: str, name: str, **arguments: object) -> AssistantMessage:
    return AssistantMessage(
        tool_calls=[ToolCall.from_raw(id=tag, name=name, raw_arguments=json.dumps(arguments))]
    )


def _hostile_steps() -> list[AssistantMessage]:
    writes = [
        _call(f"w{i}", "write_file", path=p, content=c) for i, (p, c) in enumerate(relu_files().items())
    ]
    return [
        _call("s1", "shell", command=PROBES),
        _call("r1", "read_file", path="kernels/env.cu"),
        _call("r2", "read_file", path="kernels/env1.cuh"),
        _call("r3", "read_file", path="kernels/etcdir/passwd"),
        *writes,
        _call("v1", "verify"),
        _call("s2", "shell", command="ln -sf /proc/self/environ kernels/late.cu; ls -la kernels"),
        _call("sub", "submit", summary="done"),
    ]


def _files_holding(root: Path, needle: bytes) -> list[str]:
    """Regular files under `root` (links not followed) whose bytes contain `needle`."""
    found = []
    for folder, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            if needle in path.read_bytes():
                found.append(str(path.relative_to(root)))
    return found


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_no_key_reaches_the_model_the_output_or_a_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    task = parse_task(RELU_TASK)
    out = tmp_path / "run"
    result, model = run_solve(out, _hostile_steps(), task, shell=True, allow_no_gpu=True)
    assert result.status == "submitted", result
    # nothing the model was shown, nothing written for the user, holds the key
    shown = "".join(m.model_dump_json() for call in model.calls for m in call.messages)
    assert "kernels/env.cu" in shown and CANARY not in shown
    assert _files_holding(out, CANARY.encode()) == []
    # export copied regular files only: no /etc, no links, no FIFOs in the solution
    solution = out / "solution"
    assert solution.is_dir()
    assert not (solution / "kernels" / "etcdir").exists()
    assert not [
        p for p in solution.rglob("*") if p.is_symlink() or (p.exists() and not (p.is_file() or p.is_dir()))
    ]
    # the recorded transcript, replayed with the key still set, leaks nothing either
    replayed = tmp_path / "replay"
    replay_run(out / "transcript.jsonl", out=replayed, referee=FakeReferee())
    assert _files_holding(replayed, CANARY.encode()) == []

"""The host side of a tuning run's two processes.

- the judge (trusted, a host process that never imports candidate code): reference outputs,
  verdicts per output, the task's operator features; JSON lines over pipes;
- the worker (untrusted, inside the Sandbox): imports the candidate once and measures many
  configurations; requests and results go through a mailbox folder in the workspace, because
  a Sandbox runs one command to completion. A crash (a CUDA error poisons the context) or a
  hang costs the configuration that caused it, and a fresh worker takes over the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.base import WORKERS_DIR, ExecResult, Sandbox
from sandbox.confine import confined, worker_env
from sandbox.safe_files import read_regular, write_file
from sandbox.workers.protocol import (
    MeasureLine,
    StopJudgeRequest,
    StopRequest,
    TuneJudgeAnswer,
    TuneJudgeReady,
    TuneJudgeRequest,
    TuneJudgeSpec,
    TuneRequest,
    TuneSeeds,
    TuneWorkerFailed,
    TuneWorkerReady,
    TuneWorkerSpec,
    TuneWorkerStart,
)

EXCHANGE = ".tune"
MAX_RESTARTS = 50  # each restart costs its startup in the budget; a worker that cannot start fails at once


class TuneSessionError(RuntimeError):
    """The tuning processes could not start or keep running; the message says why."""


class JudgeClient:
    def __init__(self, spec: TuneJudgeSpec, *, exchange: Path, timeout: float = 600) -> None:
        """`exchange`: the mailbox folder whose output files it reads and removes. It runs the
        task's code, so it is confined (sandbox/confine.py) with the sandbox's environment."""
        self.proc = subprocess.Popen(
            confined([sys.executable, "-I", str(WORKERS_DIR / "tune/tune_judge.py")], writable=[exchange]),
            env=worker_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        self._ids = 0
        self._timeout = timeout
        self.ready: TuneJudgeReady = {}
        self._send(spec)

    def wait_ready(self) -> TuneJudgeReady:
        """Block until the reference is computed (started early so it overlaps the worker's start)."""
        try:
            line = self._lines.get(timeout=self._timeout)
        except queue.Empty:
            line = ""
        self.ready = json.loads(line) if line else {}
        if not self.ready.get("ready"):
            detail = self.ready.get("message") or self.stderr_tail() or "it exited"
            self.close()
            raise TuneSessionError(f"the tuning judge could not compute the reference: {detail}")
        return self.ready

    def _send(self, body: TuneJudgeSpec | TuneJudgeRequest) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(body) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put("")

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-50]

    def stderr_tail(self) -> str:
        return "".join(self._stderr[-10:]).strip()

    def _ask(self, body: TuneJudgeRequest, *, timeout: float = 300) -> TuneJudgeAnswer:
        self._send(body)
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            line = ""
        if not line:
            raise TuneSessionError(f"the tuning judge stopped answering: {self.stderr_tail() or 'no output'}")
        return json.loads(line)

    def verify(self, file: str) -> TuneJudgeAnswer:
        self._ids += 1
        return self._ask({"op": "verify", "id": self._ids, "file": file})

    def known(self, fingerprint: str) -> TuneJudgeAnswer:
        self._ids += 1
        return self._ask({"op": "known", "id": self._ids, "fingerprint": fingerprint})

    def close(self) -> None:
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            stop: StopJudgeRequest = {"op": "stop"}
            self.proc.stdin.write(json.dumps(stop) + "\n")
            self.proc.stdin.flush()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@dataclass
class _Run:
    thread: threading.Thread
    result: list[ExecResult] = field(default_factory=list)


class WorkerClient:
    """One untrusted worker at a time, restarted after a crash."""

    def __init__(
        self,
        sandbox: Sandbox,
        spec: TuneWorkerSpec,
        host_dir: Path,
        *,
        env: dict[str, str],
        exec_timeout: float,
        ready_timeout: float = 600,
    ) -> None:
        self.sandbox = sandbox
        self.spec = spec
        self.base_dir = host_dir
        self.env = env
        self.exec_timeout = exec_timeout
        self.ready_timeout = ready_timeout
        self.restarts = -1
        self.ready: TuneWorkerReady = {}
        self._run: _Run | None = None
        self._dir = host_dir
        self._n = 0

    # Each generation of the worker gets a folder of its own: nothing of a dead one is read.
    def start(self) -> TuneWorkerReady:
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            raise TuneSessionError(f"the tuning worker crashed {MAX_RESTARTS} times; giving up")
        self._dir = self.base_dir / f"w{self.restarts}"
        self._dir.mkdir(parents=True)
        box_dir = f"{self.spec['box_base']}/w{self.restarts}"
        spec: TuneWorkerStart = {**self.spec, "exchange_dir": box_dir}
        stdin = json.dumps(spec).encode()
        run = _Run(thread=threading.Thread(target=lambda: None))

        def target() -> None:
            run.result.append(
                self.sandbox.exec(
                    self.sandbox.python_command(self.sandbox.worker("tune/tune_worker.py")),
                    timeout=self.exec_timeout,
                    env=self.env,
                    stdin=stdin,
                )
            )

        run.thread = threading.Thread(target=target, daemon=True)
        run.thread.start()
        self._run, self._n = run, 0
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            for name in ("ready.json", "failed.json"):
                data = read_regular(self._dir, name)  # the worker's folder: links are not followed
                if data is not None:
                    try:
                        record = json.loads(data)
                    except ValueError:
                        raise TuneSessionError(f"the tuning worker wrote a malformed {name}") from None
                    if name == "failed.json":
                        failed: TuneWorkerFailed = record
                        raise TuneSessionError(f"the tuning worker failed to start: {failed.get('message')}")
                    self.ready = record
                    return self.ready
            if not run.thread.is_alive():
                raise TuneSessionError(
                    f"the tuning worker exited before it was ready: {self._describe_exit()}"
                )
            time.sleep(0.01)
        raise TuneSessionError(f"the tuning worker was not ready after {self.ready_timeout:.0f}s")

    def _describe_exit(self) -> str:
        if self._run is None or not self._run.result:
            return "it is still running"
        result = self._run.result[0]
        tail = "\n".join(result.stderr.strip().splitlines()[-8:])
        return (result.describe_failure() or "exited") + (f"\n{tail}" if tail else "")

    def alive(self) -> bool:
        return self._run is not None and self._run.thread.is_alive()

    def request(self, body: TuneRequest, *, timeout: float) -> tuple[list[dict[str, Any]], str | None]:
        """(result lines, None) or, when the worker died or hung, (lines so far, why). The lines are
        MeasureLines or one RetimeLine, by the request; the caller reads them as such."""
        if not self.alive():
            self.start()
        n = self._n
        self._n += 1
        write_file(self._dir, f"req_{n}.json", json.dumps(body).encode())
        deadline = time.monotonic() + timeout
        offset, lines = 0, []
        while True:
            if (data := read_regular(self._dir, f"res_{n}.jsonl")) is not None:
                text = data.decode(errors="replace")
                complete = text[: text.rfind("\n") + 1]
                for line in complete[offset:].splitlines():
                    record = json.loads(line)
                    if record.get("done"):
                        return lines, None
                    lines.append(record)
                offset = len(complete)
            if not self.alive():
                if read_regular(self._dir, "hang.json") is not None:
                    return lines, "timeout"
                return lines, f"crashed: {self._describe_exit()}"
            if time.monotonic() > deadline:
                return lines, "timeout"
            time.sleep(0.002)

    def stop(self) -> None:
        if self.alive():
            with contextlib.suppress(OSError):
                stop: StopRequest = {"op": "stop"}
                write_file(self._dir, f"req_{self._n}.json", json.dumps(stop).encode())
            assert self._run is not None
            self._run.thread.join(timeout=15)


def fresh_seeds() -> TuneSeeds:
    return {
        "init_seed": secrets.randbits(62),
        "state_seed": secrets.randbits(62),
        "input_seed": secrets.randbits(62),
    }


def open_exchange(root: Path, sandbox: Sandbox) -> tuple[Path, str]:
    run_id = secrets.token_hex(6)
    host = Path(root) / EXCHANGE / run_id
    host.mkdir(parents=True)
    return host, f"{sandbox.workspace_path}/{EXCHANGE}/{run_id}"


def close_exchange(host: Path) -> None:
    shutil.rmtree(host, ignore_errors=True)
    with contextlib.suppress(OSError):
        host.parent.rmdir()


def verdict_for(judge: JudgeClient, body: MeasureLine) -> tuple[str, str]:
    """(status, error) of one measured item, decided by the judge."""
    if body.get("status") != "ok":
        return "failed", body.get("error", "failed")
    file, fingerprint = body.get("file"), body.get("fingerprint")
    if file:
        answer = judge.verify(file)
    elif fingerprint:
        answer = judge.known(fingerprint)
        if not answer.get("known"):
            return "failed", "its output could not be verified (no output file for new bits)"
    else:
        return "failed", "the worker sent no output"
    return ("ok", "") if answer.get("passed") else ("incorrect", answer.get("problem", "incorrect"))


def check_inputs_match(judge_ready: TuneJudgeReady, worker_ready: TuneWorkerReady) -> None:
    if judge_ready.get("input_checksums") != worker_ready.get("input_checksums"):
        raise TuneSessionError(
            "the task's inputs differ between the judge and the worker for the same seed: get_inputs() "
            "draws randomness torch does not seed, or the candidate changed how inputs are made"
        )

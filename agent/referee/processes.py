"""The referee's processes: the candidate worker (through the Sandbox), the trusted judge (a
host process in its own process group), the files they exchange, and reading back an
authenticated completion record.

Forgery: the candidate worker's supervisor (sandbox/workers/referee/candidate.py, a process that never
runs candidate code) receives a fresh random key on stdin and signs the record (HMAC-SHA256) in
a file; the child that imports the candidate never holds the key. The host never parses the
candidate's stdout, never takes exit status 0 for a pass, and rejects a record whose signature,
run id or completion flag is wrong. What the child reports (trials, operators, timings) is its
own observation: the host checks it against the supervisor's (timing window, seeds, rechecked
calls) and decides correctness from the outputs in the judge's process.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from agent.paths import cache_dir
from agent.referee.results import FailureReport
from agent.verdicts import Verdict
from agent.workspace import Solution
from sandbox.base import WORKERS_DIR, ExecResult, Sandbox
from sandbox.confine import confined, worker_env
from sandbox.safe_files import SkippedEntry, read_regular
from sandbox.workers.protocol import (
    RESULT_MARKER,
    CandidateRecord,
    CandidateRequest,
    CandidateSpec,
    JudgeResult,
    JudgeSpec,
    SignedRecord,
    parse,
)

EXCHANGE_DIR = ".referee"
STALE_AFTER_S = 24 * 3600


@dataclass(frozen=True)
class Seeds:
    """Chosen fresh for every evaluation from the OS's secure source; never reused."""

    init: int
    state: int
    trials: list[int]
    probe: int = 0
    """the hidden inputs' domain probe (referee_common.hidden_allowed)"""

    @classmethod
    def fresh(cls, trials: int) -> Seeds:
        return cls(
            secrets.randbits(62),
            secrets.randbits(62),
            [secrets.randbits(62) for _ in range(trials)],
            secrets.randbits(62),
        )


@dataclass
class Exchange:
    """A private folder both the sandbox and the host can see: the candidate's output files."""

    host_dir: Path
    box_dir: str
    run_id: str

    def cleanup(self) -> None:
        shutil.rmtree(self.host_dir, ignore_errors=True)
        with contextlib.suppress(OSError):  # only when no other evaluation uses it
            self.host_dir.parent.rmdir()


def open_exchange(solution: Solution, sandbox: Sandbox) -> Exchange:
    base = solution.root / EXCHANGE_DIR
    if os.path.islink(base) or (os.path.lexists(base) and not base.is_dir()):
        base.unlink()  # left by code in the sandbox: the harness makes its folders itself
    base.mkdir(exist_ok=True)
    now = time.time()
    for old in base.iterdir():  # left behind by a harness that was killed mid-evaluation
        with contextlib.suppress(OSError):
            if now - old.stat().st_mtime > STALE_AFTER_S:
                shutil.rmtree(old, ignore_errors=True)
    run_id = secrets.token_hex(8)
    host_dir = base / run_id
    host_dir.mkdir()
    # A container's user may not be ours: there the folder must be writable to it.
    host_dir.chmod(0o700 if sandbox.capabilities.shares_host_user else 0o777)
    return Exchange(
        host_dir=host_dir, box_dir=f"{sandbox.workspace_path}/{EXCHANGE_DIR}/{run_id}", run_id=run_id
    )


@dataclass
class CandidateRun:
    result: ExecResult
    record: CandidateRecord | None
    problem: str = ""  # why there is no usable record
    forged: bool = False
    last_stage: str = "start"
    notes: list[str] = field(default_factory=list)


def run_candidate(
    sandbox: Sandbox,
    spec: CandidateSpec,
    exchange: Exchange,
    *,
    timeout: float,
    env: dict[str, str],
) -> CandidateRun:
    key = secrets.token_bytes(32)
    request: CandidateRequest = {**spec, "key": key.hex(), "run_id": exchange.run_id}
    stdin = json.dumps(request).encode()
    result = sandbox.exec(
        sandbox.python_command(sandbox.worker("referee/candidate.py")), timeout=timeout, env=env, stdin=stdin
    )
    run = CandidateRun(result=result, record=None, last_stage=_last_stage(exchange.host_dir / "progress.txt"))
    printed = sum(text.count(RESULT_MARKER) for text in (result.stdout, result.stderr))
    if printed:
        run.forged = True
        run.notes.append(f"the candidate printed {printed} line(s) imitating a worker result record")
    record, problem, forged = read_record(exchange.host_dir / "result.json", key, exchange.run_id)
    run.forged = run.forged or forged
    if record is not None and not result.timed_out and result.returncode == 0:
        run.record = record
    else:
        run.problem = problem or (
            "the worker wrote its record but then " + result.describe_failure() if record is not None else ""
        )
    return run


def read_record(path: Path, key: bytes, run_id: str) -> tuple[CandidateRecord | None, str, bool]:
    """(body, problem, forged): the body only when the signature and the run id check out."""
    skipped: list[SkippedEntry] = []
    data = _read_exchange_file(path, skipped)
    if data is None and not skipped:
        return None, "it left no completion record", False
    try:
        if data is None:
            raise ValueError(skipped[0].reason)
        wrapper: SignedRecord = json.loads(data)
        payload, mac = wrapper["body"], wrapper["mac"]
        if not isinstance(payload, str) or not isinstance(mac, str):
            raise TypeError("body and mac must be strings")
    except (OSError, ValueError, KeyError, TypeError):
        return None, "its completion record is malformed (not written by the worker)", True
    expected = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, expected):
        return None, "its completion record failed authentication (forged)", True
    body: CandidateRecord = json.loads(payload)
    if body.get("run_id") != run_id:
        return None, "its completion record belongs to another run (replayed)", True
    return body, "", False


def _read_exchange_file(path: Path, skipped: list[SkippedEntry] | None = None) -> bytes | None:
    """A file of the exchange folder (<workspace>/.referee/<run id>/<name>), which the candidate can
    write: neither the run's folder nor the file is followed when it is a link, and a FIFO never
    blocks the read."""
    return read_regular(path.parents[2], "/".join(path.parts[-3:]), skipped)


def _last_stage(path: Path) -> str:
    data = _read_exchange_file(path)
    if data is None:
        return "start"
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else "start"


class JudgeProcess:
    """The trusted judge, started early so that `import torch` overlaps the candidate's run; it
    waits for its spec on stdin and touches no GPU before it gets it."""

    def __init__(
        self,
        env_overrides: dict[str, str] | None = None,
        *,
        handoff: socket.socket | None = None,
        device: str = "",
        memory_fds: list[int] | None = None,
        visible: Sequence[str | Path] = (),
    ) -> None:
        """`handoff`: the listening socket of the exchange folder (gpu_handoff.listen); the judge
        inherits it and takes the candidate's GPU outputs on it from its start. Closed here.
        `memory_fds`: the evaluation's claim on the GPU's memory (gpu_memory), which the judge
        inherits and gives back as its own use of memory ends; the caller closes its copies.
        `visible`: what it reads besides torch (the exchange folder, the GPU gate's folder); it runs
        the task's code, so it is confined (sandbox/confine.py) and writes only its compile cache."""
        inductor = cache_dir() / "referee" / "inductor"  # the harness's state: no sandbox writes here
        env = worker_env(
            {
                "TORCHINDUCTOR_CACHE_DIR": str(inductor),
                "TRITON_CACHE_DIR": str(inductor / "triton"),
                # Inductor otherwise starts a pool of one worker process per core (each importing
                # torch) in every judge: a batch's judges spent more CPU on those pools than on
                # compiling KernelBench's small graphs. In-process compilation writes the same kernels.
                "TORCHINDUCTOR_COMPILE_THREADS": "1",
            }
        )
        env.update(env_overrides or {})
        self.started = time.monotonic()
        # It dies with this process (sandbox/workers/gpu/lifetime.py): the thread that starts it waits for it.
        args = [sys.executable, "-I", str(WORKERS_DIR / "referee/judge.py"), "--parent", str(os.getpid())]
        passed = list(memory_fds or [])
        if handoff is not None:
            args += ["--handoff-fd", str(handoff.fileno()), "--device", device]
            passed.append(handoff.fileno())
        if memory_fds:
            args += ["--memory-fds", ",".join(map(str, memory_fds))]
        try:
            args = confined(args, writable=[inductor], visible=visible)
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
                pass_fds=tuple(passed),
            )
        finally:
            if handoff is not None:
                handoff.close()

    def run(self, spec: JudgeSpec, *, timeout: float) -> tuple[JudgeResult | None, ExecResult]:
        start = time.monotonic()
        timed_out = False
        try:
            out, err = self.proc.communicate((json.dumps(spec) + "\n").encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill()
            out, err = self.proc.communicate()
        self._kill()
        result = ExecResult(
            returncode=self.proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )
        return cast("JudgeResult | None", parse(result.stdout)), result

    def abandon(self) -> None:
        self._kill()
        with contextlib.suppress(Exception):
            self.proc.communicate(timeout=10)

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def stderr_tail(text: str, lines: int = 25) -> str:
    """The end of a worker's stderr, without the profiler's and torch's routine chatter."""
    noise = ("USDT:", "STAGE:", "WARNING:2", "ERROR:2", "[W", "warnings.warn")
    kept = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(noise)]
    return "\n".join(kept[-lines:])


def candidate_failure(run: CandidateRun, timeout: float) -> tuple[Verdict, FailureReport]:
    """(verdict, failure) for a candidate worker that left no complete record."""
    r, stage = run.result, run.last_stage
    detail = stderr_tail(r.stderr)
    failure = run.record.get("failure") if run.record is not None else None
    if failure:
        kind = failure.get("kind", "exception")
        where = failure.get("stage", stage)
        verdicts: dict[str, Verdict] = {
            "input_tampering": "policy_violation",
            "no_gpu": "no_gpu",
            "referee_capacity": "referee_error",  # the task is too large for where it is judged
        }
        verdict = verdicts.get(kind, "runtime_error")
        report = FailureReport(
            stage=where,
            kind=kind,
            message=f"{where}: {failure.get('message', '')}",
            detail=failure.get("traceback") or detail,
            returncode=r.returncode,
        )
        return verdict, report
    if run.forged:
        notes = "; ".join([*run.notes, run.problem] if run.problem else run.notes)
        message = f"forged completion record: {notes}"
        return "policy_violation", FailureReport(
            stage=stage, kind="forged_record", message=message, detail=detail
        )
    if r.timed_out and stage.startswith("waiting for the GPU"):
        message = (
            f"the evaluation ran past {timeout:.0f}s waiting for its turn on the GPU (another "
            "evaluation held it); not the candidate's fault: evaluate it again"
        )
        return "referee_error", FailureReport(stage=stage, kind="gpu_busy", message=message, detail=detail)
    if r.timed_out:
        message = f"the candidate ran past {timeout:.0f}s during {stage} and was killed (an endless loop or a hung kernel?)"
        return "timeout", FailureReport(stage=stage, kind="timeout", message=message, detail=detail)
    if r.signal is not None:
        message = f"the candidate process was {r.describe_failure()} during {stage}"
        return "runtime_error", FailureReport(
            stage=stage, kind="signal", message=message, detail=detail, returncode=r.returncode
        )
    if r.returncode == 0:
        message = (
            f"the candidate process exited (status 0) during {stage} without a completion record: "
            "candidate code ended the process (exit or os._exit)"
        )
        return "runtime_error", FailureReport(
            stage=stage, kind="early_exit", message=message, detail=detail, returncode=0
        )
    last = detail.splitlines()[-1] if detail else ""
    message = f"the candidate process {r.describe_failure() or run.problem} during {stage}" + (
        f": {last}" if last else ""
    )
    return "runtime_error", FailureReport(
        stage=stage, kind="exit", message=message, detail=detail, returncode=r.returncode
    )

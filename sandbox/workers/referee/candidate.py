"""The candidate worker's trusted supervisor (stdlib only): the process the host starts.

usage: python -I candidate.py      (the spec, JSON, on stdin)

It holds what candidate code must not reach, in a process no candidate code runs in: the run's key
(only it signs the completion record), the seeds of the timed calls (sent when the timing window
opens, so none can be precomputed), the choice of timed calls to recheck (made when the window
closes, from outputs the child had to keep), the GPU gate, and a clock of its own on the timing
window. The child asks for the gate's shared hold once it has imported torch and before it touches
the GPU; no candidate code has run by then (it is imported later), so its startup, seconds of CPU,
does not keep other evaluations from timing, and its GPU work is never ungated. It starts
`candidate_child.py`, which imports the candidate and does the work, and talks with it over a pipe
(JSON lines). What the child reports is observations the host checks against what the supervisor
saw; the supervisor adds its own under `supervisor`.

Exit: 0 with a signed record when the child sent one and exited cleanly; otherwise the child's
own status (a signal re-raised as that signal), so the host sees the crash as it happened.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import hmac
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from typing import IO, TYPE_CHECKING

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import siblings  # noqa: F401  (the workers import each other by name)

# isort: split
from gpu_gate import open_gate

if TYPE_CHECKING:
    from protocol import (
        CandidateRecord,
        CandidateRequest,
        ChildMessage,
        SupervisorAnswer,
        SupervisorView,
        TimingWindow,
    )

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "candidate_child.py")
PR_SET_DUMPABLE = 4
MAX_STAGES = 200


def _not_dumpable() -> None:
    """Keep same-uid processes (the child) out of this one's memory: no ptrace, no /proc/PID/mem."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


class Supervisor:
    def __init__(self, spec: CandidateRequest, key: bytes) -> None:
        self.spec = spec
        self._key = key
        self.exchange = spec["exchange_dir"]
        self.gate = open_gate(spec.get("gpu_gate"))
        self._progress = os.open(
            os.path.join(self.exchange, "progress.txt"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
        )
        self.started = time.monotonic()
        self.seen: SupervisorView = {
            "gate": "none requested"
            if not spec.get("gpu_gate")
            else ("held" if self.gate else "unavailable"),
            "gate_wait_s": 0.0,
            "stages": [],
            "window": None,
        }
        self._window_start = 0.0
        self._picker = random.Random(secrets.randbits(64))

    # -- what the child asks ---------------------------------------------------------------
    def handle(self, message: ChildMessage) -> SupervisorAnswer | None:
        op = message.get("op")
        if op == "stage":
            name = str(message.get("name", ""))[:200]
            if len(self.seen["stages"]) < MAX_STAGES:
                self.seen["stages"].append((name, round(time.monotonic() - self.started, 4)))
            os.write(self._progress, (name.replace("\n", " ") + "\n").encode())
            return None
        if op == "exclusive":
            self.hold("exclusive")
            return {"ok": True}
        if op in ("shared", "exclusive_done"):
            self.hold("shared")
            return {"ok": True}
        if op == "window_open":
            return self._open_window(message)
        if op == "window_close":
            return self._close_window(message)
        return {"error": f"unknown request {op!r}"}

    def hold(self, mode: str) -> None:
        if self.gate is None:
            return
        waited = time.monotonic()
        self.gate.hold(mode)  # type: ignore[arg-type]
        self.seen["gate_wait_s"] += time.monotonic() - waited

    def _open_window(self, message: ChildMessage) -> SupervisorAnswer:
        reps = max(0, int(message.get("reps", 0)))
        hold = bool(message.get("hold"))
        rechecks = max(0, int(self.spec.get("rechecks", 2)))
        window: TimingWindow = {
            "reps_planned": reps,
            "seed": secrets.randbits(62),
            "held_outputs": hold,
            "rechecks": min(rechecks, reps),
            "picks": [],
            "picks_known_in_advance": not hold,
        }
        if not hold:  # the child cannot keep every output: it learns the picks now, and says so
            window["picks"] = sorted(self._picker.sample(range(reps), window["rechecks"]))
        self.seen["window"] = window
        answer: SupervisorAnswer = {"seed": window["seed"], "picks": window["picks"] if not hold else None}
        self._window_start = time.monotonic()
        return answer

    def _close_window(self, message: ChildMessage) -> SupervisorAnswer:
        elapsed_ms = (time.monotonic() - self._window_start) * 1e3
        window = self.seen["window"]
        if window is None:
            return {"error": "window_close without window_open"}
        reps_run = min(max(0, int(message.get("reps", 0))), window["reps_planned"])
        window.update(window_ms=elapsed_ms, reps_run=reps_run)
        if window["held_outputs"]:
            window["picks"] = sorted(self._picker.sample(range(reps_run), min(window["rechecks"], reps_run)))
        return {"picks": window["picks"]}

    # -- the record ------------------------------------------------------------------------
    def sign(self, body: CandidateRecord) -> None:
        body["supervisor"] = self.seen
        payload = json.dumps(body, sort_keys=True, default=str)
        mac = hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()
        path = os.path.join(self.exchange, "result.json")
        with open(path + ".tmp", "w") as handle:
            handle.write(json.dumps({"body": payload, "mac": mac}))
        os.replace(path + ".tmp", path)


def _bytecode_flags() -> list[str]:
    """The child reads its bytecode where we do (the harness's read-only folder, if any)."""
    return ["-X", f"pycache_prefix={sys.pycache_prefix}"] if sys.pycache_prefix else []


def main() -> None:
    _not_dumpable()
    spec: CandidateRequest = json.loads(sys.stdin.buffer.read())
    key = bytes.fromhex(spec.pop("key"))
    supervisor = Supervisor(spec, key)
    del key
    from_child, to_us = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-I", *_bytecode_flags(), CHILD, str(to_us)],
        stdin=subprocess.PIPE,
        pass_fds=(to_us,),
        close_fds=True,
    )
    os.close(to_us)
    assert child.stdin is not None
    body = converse(supervisor, child.stdin, os.fdopen(from_child, "rb"), spec)
    returncode = child.wait()
    if body is not None:
        supervisor.sign(body)
    if supervisor.gate is not None:
        supervisor.gate.close()
    if returncode < 0:
        signal.signal(-returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -returncode)
    sys.exit(0 if body is not None and returncode == 0 else (returncode or 0))


def converse(
    supervisor: Supervisor, to_child: IO[bytes], from_child: IO[bytes], spec: CandidateRequest
) -> CandidateRecord | None:
    """Serve the child's requests until it sends its record (returned) or goes away (None)."""
    try:
        to_child.write((json.dumps(spec) + "\n").encode())
        to_child.flush()
        for line in from_child:
            try:
                message: ChildMessage = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("op") == "result":
                body = message.get("body")
                return body if isinstance(body, dict) else None
            answer = supervisor.handle(message)
            if answer is not None:
                to_child.write((json.dumps(answer) + "\n").encode())
                to_child.flush()
    except (BrokenPipeError, OSError):
        return None
    return None


if __name__ == "__main__":
    main()

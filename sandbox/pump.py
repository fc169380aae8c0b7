"""Feed a child's stdin and read its stdout/stderr incrementally, with a deadline and a cap.

Reading as it comes (never `communicate()`) means a command that floods its output costs the
harness at most the cap in memory; the rest is read and dropped so the command is not blocked.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from collections.abc import Callable

from sandbox.base import CappedBuffer

_CHUNK = 1 << 16
_IDLE_POLL_S = 0.2  # how often to look whether the command exited while a straggler holds the pipes
_DRAIN_AFTER_KILL_S = 1.0


def pump(
    proc: subprocess.Popen[bytes],
    stdin: bytes | None,
    deadline: float,
    cap: int,
    kill: Callable[[], None],
) -> tuple[CappedBuffer, CappedBuffer, bool]:
    """Returns (stdout, stderr, timed_out). Calls `kill` on timeout, and when the command has
    exited but something it left behind still holds its output pipes open."""
    out, err = CappedBuffer(cap), CappedBuffer(cap)
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    for stream, buf in ((proc.stdout, out), (proc.stderr, err)):
        os.set_blocking(stream.fileno(), False)
        sel.register(stream.fileno(), selectors.EVENT_READ, buf)
    pending = memoryview(stdin or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        if pending:
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, None)
        else:
            proc.stdin.close()
    timed_out = False
    stop_at: float | None = None  # set once the command is killed or gone: drain briefly, then stop
    try:
        while sel.get_map():
            now = time.monotonic()
            if stop_at is None and now >= deadline:
                timed_out = True
                kill()
                stop_at = now + _DRAIN_AFTER_KILL_S
            if stop_at is not None and now >= stop_at:
                break
            limit = stop_at if stop_at is not None else deadline
            events = sel.select(min(max(limit - now, 0.0), _IDLE_POLL_S))
            if not events and stop_at is None and proc.poll() is not None:
                kill()
                stop_at = time.monotonic() + _DRAIN_AFTER_KILL_S
            for key, _ in events:
                if key.data is None:
                    pending = _write_some(proc, sel, key.fd, pending)
                    continue
                try:
                    data = os.read(key.fd, _CHUNK)
                except BlockingIOError:
                    continue
                if data:
                    key.data.feed(data)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    return out, err, timed_out


def _write_some(
    proc: subprocess.Popen[bytes], sel: selectors.BaseSelector, fd: int, pending: memoryview
) -> memoryview:
    assert proc.stdin is not None
    try:
        written = os.write(fd, pending[:_CHUNK])
    except BlockingIOError:
        return pending
    except (BrokenPipeError, OSError):
        written = len(pending)  # the command closed its stdin: drop the rest
    pending = pending[written:]
    if not pending:
        sel.unregister(fd)
        proc.stdin.close()
    return pending

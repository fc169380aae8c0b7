"""The evaluation worker process: `python -m agent.batch.executors.worker READ_FD WRITE_FD`.

It says ("ready", None) once its imports are done (they can take many seconds; they must not
count against an evaluation's time limit), then receives (function, args) pickles on one pipe and answers ("ok", value) or ("error",
traceback) on the other, one call at a time, until the pipe closes (its parent is gone).
A plain module run by a fresh interpreter, unlike multiprocessing's spawn, never re-imports the
caller's __main__ script.
"""

from __future__ import annotations

import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any


def serve(inbox: Connection, outbox: Connection) -> None:
    import agent.batch.jobs  # noqa: F401 - the referee's imports (torch) happen before "ready"

    try:
        outbox.send(("ready", None))
    except OSError:  # the parent closed before this worker was ready (a batch with nothing to do)
        return
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        fn, args = message
        try:
            reply: tuple[str, Any] = ("ok", fn(*args))
        except BaseException:
            reply = ("error", traceback.format_exc())
        try:
            outbox.send(reply)
        except OSError:  # the parent is gone
            return


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))

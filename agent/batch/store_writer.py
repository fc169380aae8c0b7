"""Who is writing a store: a small record beside it (`STORE.writer`), present while one of our
processes holds the store's write lock, so that a batch kept waiting can say who it waits for.

SQLite itself cannot say which process holds a lock. Each write transaction of agent.batch.store
writes this record once it has the lock and removes it when it commits or rolls back; a record
whose process is gone (killed mid-transaction) is ignored. No record while the store is locked
means the holder is not an agent process (an `sqlite3` shell, a backup tool).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

STORE_WAIT_ENV = "KERNEL_AGENT_STORE_WAIT"
"""Seconds a batch waits for another writer's lock on its store before it gives up (default 120)."""
DEFAULT_STORE_WAIT_S = 120.0
COMMAND_CHARS = 160


class WriterRecord(BaseModel):
    """The process that holds a store's write lock."""

    pid: int
    host: str
    command: str
    since: float

    def alive(self) -> bool:
        if self.host != socket.gethostname():
            return True  # a shared filesystem: nothing here can tell
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def record_path(store: Path) -> Path:
    return store.with_name(store.name + ".writer")


def store_wait_s() -> float:
    """The wait from KERNEL_AGENT_STORE_WAIT, else DEFAULT_STORE_WAIT_S (an unreadable value too)."""
    try:
        value = float(os.environ.get(STORE_WAIT_ENV, DEFAULT_STORE_WAIT_S))
    except ValueError:
        return DEFAULT_STORE_WAIT_S
    return value if value > 0 else DEFAULT_STORE_WAIT_S


def write_record(store: Path) -> None:
    """Say that this process holds the write lock (best effort: a store in a read-only folder
    still works, it just cannot name its writer)."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    program = "agent" if program == "__main__.py" else program  # python -m agent.cli
    command = " ".join([program, *sys.argv[1:]])[:COMMAND_CHARS]
    record = WriterRecord(pid=os.getpid(), host=socket.gethostname(), command=command, since=time.time())
    path = record_path(store)
    scratch = path.with_name(f"{path.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        scratch.write_text(record.model_dump_json())
        os.replace(scratch, path)


def clear_record(store: Path) -> None:
    """Remove the record if it is this process's (a process that lost its lock never removes
    another one's)."""
    path = record_path(store)
    holder = read_record(store)
    if holder is not None and holder.pid == os.getpid() and holder.host == socket.gethostname():
        with contextlib.suppress(OSError):
            path.unlink()


def read_record(store: Path) -> WriterRecord | None:
    try:
        return WriterRecord.model_validate_json(record_path(store).read_bytes())
    except (OSError, ValidationError):
        return None


def describe_writer(store: Path) -> str:
    """`another agent batch (pid N) is writing it`, or what is known when no record is there."""
    holder = read_record(store)
    if holder is None or not holder.alive() or holder.pid == os.getpid():
        return "another process holds its write lock (not an agent batch: no writer record)"
    where = "" if holder.host == socket.gethostname() else f" on {holder.host}"
    what = "agent batch" if " batch" in f" {holder.command}" else "agent process"
    return f"another {what} (pid {holder.pid}{where}) is writing it ({holder.command})"


def wait_message(store: Path) -> str:
    return f"waiting for the store {store}: {describe_writer(store)}"


def locked_message(store: Path, waited_s: float) -> str:
    return (
        f"{store}: still locked after {waited_s:.0f}s: {describe_writer(store)}; let it finish or stop "
        f"it, then rerun (or set {STORE_WAIT_ENV}=SECONDS to wait longer)"
    )

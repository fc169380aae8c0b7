"""The results store: SQLite (WAL, busy timeout), schema versioned by numbered migrations.

An attempt row is committed when it starts (`running`) and again when it ends, so a batch
killed at any moment (kill -9 included) leaves only rows that say what happened. Claiming an
item is one IMMEDIATE transaction, and a partial unique index allows at most one live
(`running` or `done`) attempt per item and batch, so two batches sharing a store split the work
instead of doubling it. A `running` row whose process is gone is marked `abandoned` and redone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.batch.config import BatchConfig, WorkItem
from agent.batch.migrations import MIGRATIONS, statements
from agent.batch.records import AttemptRecord, RunRecord, evaluation_columns, record_from_row, run_from_row
from agent.batch.store_writer import clear_record, locked_message, store_wait_s, wait_message, write_record
from agent.referee.results import EvalResult
from agent.run.region_records import RegionRun
from agent.tasks import Task

log = logging.getLogger(__name__)

LEASE_S = 300.0
"""A run on another host that has not written a heartbeat for this long is taken for dead."""


class StoreError(RuntimeError):
    pass


class StoreLockedError(StoreError):
    """Another process held the store's write lock for longer than the store waits."""


WAIT_SLICE_S = 2.0
"""How long SQLite's own busy handler waits before the store says it is waiting (then retries)."""


SQLITE_HEADER = b"SQLite format 3\x00"
STORE_TABLES = frozenset({"runs", "tasks", "attempts", "evaluations"})


def check_store_file(path: Path) -> None:
    """Raise StoreError (one line naming `path`) unless `path` is a kernel-agent store this version
    can read. Opens it read-only: nothing is written, not even to a file that is not a store."""
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"{path}: no such file")
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not head:
        raise StoreError(f"{path}: an empty file, not a kernel-agent store")
    if head != SQLITE_HEADER:
        raise StoreError(f"{path}: not an SQLite database, so not a kernel-agent store")
    db = _connect_readonly(path)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if tables >= STORE_TABLES:
            db.execute("SELECT COUNT(*) FROM runs").fetchone()
            db.execute("SELECT COUNT(*) FROM attempts").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: a corrupt or truncated SQLite file ({exc})") from None
    finally:
        db.close()
    if not tables >= STORE_TABLES or version < 1:
        raise StoreError(f"{path}: an SQLite database, but not a kernel-agent store (no batch tables)")
    if version > len(MIGRATIONS):
        raise StoreError(
            f"{path}: schema version {version} is newer than this kernel-agent "
            f"({len(MIGRATIONS)}); upgrade kernel-agent to read it"
        )


def _check_header(path: Path) -> None:
    """Raise StoreError when `path` is a non-empty file that is not SQLite at all."""
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if head and head != SQLITE_HEADER:
        raise StoreError(f"{path}: not an SQLite database, so not a kernel-agent store")


def _connect_readonly(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    # Without a -wal file beside it no batch is writing: `immutable` reads it without creating
    # the -shm and -wal files that a read-only WAL connection otherwise leaves behind.
    idle = not path.with_name(path.name + "-wal").exists()
    uri = f"{path.resolve().as_uri().replace('file://', 'file:', 1)}?mode=ro" + (
        "&immutable=1" if idle else ""
    )
    try:
        return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot be opened as an SQLite database ({exc})") from None


def _upgraded_copy(db: sqlite3.Connection) -> sqlite3.Connection:
    """An in-memory copy of an older store with the later migrations applied, so that reports read
    every store through one schema (a store from before region runs has no region_runs table, one
    from before precision policies no precision columns). The file itself is left as it is."""
    copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db.backup(copy)
    db.close()
    copy.row_factory = sqlite3.Row
    current = int(copy.execute("PRAGMA user_version").fetchone()[0])
    for number, script in enumerate(MIGRATIONS[current:], start=current + 1):
        for statement in statements(script):
            copy.execute(statement)
        copy.execute(f"PRAGMA user_version = {number}")
    return copy


@dataclass(frozen=True)
class Claim:
    attempt_id: int
    stale_output_dirs: list[str]


def process_owner(pid: int | None = None) -> str:
    """host:pid:start-time, so that a reused pid is not taken for the process that died."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def owner_alive(owner: str, heartbeat_at: float, now: float) -> bool:
    host, pid, started = owner.rsplit(":", 2)
    if host != socket.gethostname():
        return now - heartbeat_at < LEASE_S
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _start_time(int(pid)) == started


def _start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "?"
    return stat.rsplit(")", 1)[1].split()[19]


class Store:
    """One connection per Store, shared by the batch's threads under a lock. `readonly=True`
    (reports) opens an existing store as it is, after `check_store_file`: no migration, no writes."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_s: float | None = None,
        readonly: bool = False,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        """`busy_timeout_s`: how long a write waits for another writer's lock (default: the
        KERNEL_AGENT_STORE_WAIT environment variable, else 120 s); `on_wait` is told once per
        wait, after WAIT_SLICE_S, who holds it (default: a logged warning)."""
        self.path = Path(path)
        self._lock = threading.RLock()
        busy_timeout_s = store_wait_s() if busy_timeout_s is None else busy_timeout_s
        self.busy_timeout_s = busy_timeout_s
        self.on_wait = on_wait or log.warning
        if readonly:
            check_store_file(self.path)
            self._db = _connect_readonly(self.path, busy_timeout_s)
            self._db.row_factory = sqlite3.Row
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            if self.schema_version < len(MIGRATIONS):
                self._db = _upgraded_copy(self._db)
            return
        # An empty file, or an SQLite file without tables, is a store another process is
        # creating (`agent batch` refuses a user's empty file up front, with check_store_file).
        _check_header(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            self._db.row_factory = sqlite3.Row
            self._db.execute(f"PRAGMA busy_timeout = {int(min(WAIT_SLICE_S, busy_timeout_s) * 1000)}")
            mode = self._enable_wal(busy_timeout_s)
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"{self.path}: SQLite refused WAL mode ({mode}); is it on a network filesystem?"
                )
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self.migrate()
        except sqlite3.OperationalError:
            self._db.close()
            raise
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"{self.path}: a corrupt or truncated SQLite file ({exc})") from None
        except BaseException:
            self._db.close()
            raise

    def _enable_wal(self, busy_timeout_s: float) -> str:
        # Switching to WAL needs an exclusive lock, and SQLite answers "database is locked" at
        # once, without its busy handler, while another process opens the same new store.
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                return str(self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._begin_immediate()
            write_record(self.path)
            try:
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            finally:
                clear_record(self.path)

    def _begin_immediate(self) -> None:
        """Take the write lock, waiting up to busy_timeout_s for another writer: after the first
        slice `on_wait` hears who holds it; past the timeout StoreLockedError names them."""
        started = time.monotonic()
        told = False
        while True:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            waited = time.monotonic() - started
            if waited >= self.busy_timeout_s:
                raise StoreLockedError(locked_message(self.path, waited))
            if not told:
                self.on_wait(wait_message(self.path))
                told = True

    # -- schema ---------------------------------------------------------------------------
    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self) -> None:
        with self._tx() as db:
            current = int(db.execute("PRAGMA user_version").fetchone()[0])
            if current == 0:
                others = {
                    r[0]
                    for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                    if not r[0].startswith("sqlite_")
                }
                if others:
                    raise StoreError(
                        f"{self.path}: an SQLite database, but not a kernel-agent store (no batch tables)"
                    )
            if current > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path}: schema version {current} is newer than this kernel-agent "
                    f"({len(MIGRATIONS)}); upgrade kernel-agent to read it"
                )
            for number, script in enumerate(MIGRATIONS[current:], start=current + 1):
                for statement in statements(script):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    # -- runs -----------------------------------------------------------------------------
    def start_run(
        self,
        config: BatchConfig,
        *,
        versions: dict[str, Any],
        gpus: list[dict[str, Any]],
        load_errors: list[str] | None = None,
    ) -> int:
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO runs (batch_key, mode, config_json, versions_json, gpus_json, load_errors_json,"
                " host, pid, owner, status, started_at, heartbeat_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    config.batch_key(),
                    config.mode,
                    config.model_dump_json(),
                    json.dumps(versions, sort_keys=True),
                    json.dumps(gpus),
                    json.dumps(load_errors or []),
                    socket.gethostname(),
                    os.getpid(),
                    process_owner(),
                    "running",
                    now,
                    now,
                ),
            )
            return int(cur.lastrowid or 0)

    def heartbeat(self, run_id: int) -> None:
        with self._tx() as db:
            db.execute("UPDATE runs SET heartbeat_at = ? WHERE id = ?", (time.time(), run_id))

    def finish_run(self, run_id: int, status: str) -> None:
        now = time.time()
        with self._tx() as db:
            db.execute(
                "UPDATE runs SET status = ?, finished_at = ?, heartbeat_at = ? WHERE id = ?",
                (status, now, now, run_id),
            )

    def runs(self) -> list[RunRecord]:
        with self._lock:
            return [run_from_row(r) for r in self._db.execute("SELECT * FROM runs ORDER BY id")]

    # -- tasks and attempts ---------------------------------------------------------------
    def add_tasks(self, tasks: list[Task]) -> None:
        with self._tx() as db:
            db.executemany(
                "INSERT INTO tasks (key, name, level, problem_id, sha256, path) VALUES (?,?,?,?,?,?)"
                " ON CONFLICT(key) DO UPDATE SET path = excluded.path",
                [(t.key, t.name, t.level, t.problem_id, t.sha256, str(t.path)) for t in tasks],
            )

    def supersede(self, batch_key: str, item_keys: list[str]) -> int:
        """Retire the finished attempts of `item_keys` (`--redo`); returns how many."""
        count = 0
        with self._tx() as db:
            for key in item_keys:
                count += db.execute(
                    "UPDATE attempts SET status = 'superseded' WHERE batch_key = ? AND item_key = ?"
                    " AND status IN ('done', 'error')",
                    (batch_key, key),
                ).rowcount
        return count

    def claim(
        self, run_id: int, batch_key: str, item: WorkItem, *, retry_errors: bool = True
    ) -> Claim | None:
        """Start an attempt at `item` unless it is done, live elsewhere, or (optionally) failed."""
        now = time.time()
        with self._tx() as db:
            rows = db.execute(
                "SELECT a.id, a.status, a.output_dir, r.owner, r.heartbeat_at FROM attempts a"
                " JOIN runs r ON r.id = a.run_id WHERE a.batch_key = ? AND a.item_key = ?"
                " AND a.status IN ('running', 'done', 'error')",
                (batch_key, item.item_key),
            ).fetchall()
            stale: list[str] = []
            for row in rows:
                if row["status"] == "done":
                    return None
                if row["status"] == "error" and not retry_errors:
                    return None
                if row["status"] == "running":
                    if owner_alive(row["owner"], row["heartbeat_at"], now):
                        return None
                    db.execute(
                        "UPDATE attempts SET status = 'abandoned', finished_at = ?, error = ? WHERE id = ?",
                        (now, f"the batch process running it ({row['owner']}) died", row["id"]),
                    )
                    if row["output_dir"]:
                        stale.append(row["output_dir"])
            cur = db.execute(
                "INSERT INTO attempts (run_id, batch_key, item_key, task_key, candidate, source, status,"
                " started_at) VALUES (?,?,?,?,?,?,'running',?)",
                (
                    run_id,
                    batch_key,
                    item.item_key,
                    item.task.key,
                    item.candidate,
                    str(item.source) if item.source else None,
                    now,
                ),
            )
            return Claim(attempt_id=int(cur.lastrowid or 0), stale_output_dirs=stale)

    def set_output_dir(self, attempt_id: int, output_dir: Path) -> None:
        with self._tx() as db:
            db.execute("UPDATE attempts SET output_dir = ? WHERE id = ?", (str(output_dir), attempt_id))

    def finish_attempt(self, attempt_id: int, outcome: AttemptRecord) -> None:
        now = time.time()
        with self._tx() as db:
            db.execute(
                "UPDATE attempts SET status = ?, finished_at = ?, verdict = ?, wall_s = ?, tokens = ?,"
                " usd = ?, gpu_s = ?, solution_path = ?, transcript_path = ?, error = ?"
                " WHERE id = ? AND status = 'running'",
                (
                    outcome.status,
                    now,
                    outcome.verdict,
                    outcome.wall_s,
                    outcome.tokens,
                    outcome.usd,
                    outcome.gpu_s,
                    outcome.solution_path,
                    outcome.transcript_path,
                    outcome.error,
                    attempt_id,
                ),
            )
            if db.execute("SELECT changes()").fetchone()[0] == 0:
                return  # abandoned meanwhile (interrupt): its redo owns the item now
            evaluations = [("intermediate", r) for r in outcome.evaluations]
            if outcome.result is not None:
                evaluations.append(("final", outcome.result))
            for role, result in evaluations:
                db.execute(
                    "INSERT INTO evaluations (attempt_id, role, verdict, reason, compiled, correct,"
                    " speedup_eager, speedup_compile, gpu_s, compile_s, total_s, gpu, result_json,"
                    " precision, measured_precision, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (attempt_id, role, *evaluation_columns(result), now),
                )
            if outcome.regions is not None:
                run = outcome.regions
                db.execute(
                    "INSERT INTO region_runs (attempt_id, speedup_eager, speedup_compile, covered_share,"
                    " run_json) VALUES (?,?,?,?,?)",
                    (
                        attempt_id,
                        run.speedup_eager,
                        run.speedup_compile,
                        run.covered_share,
                        run.model_dump_json(),
                    ),
                )

    def abandon_running(self, run_id: int, why: str) -> int:
        with self._tx() as db:
            return db.execute(
                "UPDATE attempts SET status = 'abandoned', finished_at = ?, error = ?"
                " WHERE run_id = ? AND status = 'running'",
                (time.time(), why, run_id),
            ).rowcount

    def attempt_status(self, attempt_id: int) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT status FROM attempts WHERE id = ?", (attempt_id,)).fetchone()
        return row["status"] if row else None

    def attempts(self, batch_key: str | None = None) -> list[AttemptRecord]:
        """Every attempt (oldest first) with its final evaluation's numbers."""
        query = (
            "SELECT a.*, t.name AS task_name, t.level, t.problem_id, e.compiled, e.correct, e.speedup_eager,"
            " e.speedup_compile, e.compile_s, json_extract(e.result_json, '$.performance.flags') AS flags_json"
            " FROM attempts a JOIN tasks t ON t.key = a.task_key"
            " LEFT JOIN evaluations e ON e.attempt_id = a.id AND e.role = 'final'"
        )
        args: tuple[Any, ...] = ()
        if batch_key is not None:
            query, args = query + " WHERE a.batch_key = ?", (batch_key,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY a.id", args).fetchall()
        return [record_from_row(row) for row in rows]

    def results(self, batch_key: str | None = None) -> list[AttemptRecord]:
        """Per item the attempt that counts: the latest `done`, else the latest `error`."""
        chosen: dict[tuple[str, str], AttemptRecord] = {}
        for rec in self.attempts(batch_key):
            key = (rec.batch_key, rec.item_key)
            if rec.status == "done" or (rec.status == "error" and chosen.get(key, rec).status != "done"):
                chosen[key] = rec
        return sorted(chosen.values(), key=lambda r: r.attempt_id)

    def evaluations(self, attempt_id: int, role: str = "final") -> list[EvalResult]:
        """The referee's verdicts of one attempt in `role` ("final" or "intermediate"), oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT result_json FROM evaluations WHERE attempt_id = ? AND role = ? ORDER BY id",
                (attempt_id, role),
            ).fetchall()
        return [EvalResult.model_validate_json(r["result_json"]) for r in rows]

    def region_runs(self, attempt_ids: list[int]) -> dict[int, RegionRun]:
        """The regions of those attempts that ran region by region, by attempt id."""
        if not attempt_ids:
            return {}
        marks = ",".join("?" for _ in attempt_ids)
        with self._lock:
            rows = self._db.execute(
                f"SELECT attempt_id, run_json FROM region_runs WHERE attempt_id IN ({marks})",
                tuple(attempt_ids),
            ).fetchall()
        return {r["attempt_id"]: RegionRun.model_validate_json(r["run_json"]) for r in rows}

    def batch_keys(self) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT batch_key FROM runs GROUP BY batch_key ORDER BY MIN(id)"
            ).fetchall()
        return [r["batch_key"] for r in rows]

    def integrity_check(self) -> str:
        with self._lock:
            return str(self._db.execute("PRAGMA integrity_check").fetchone()[0])

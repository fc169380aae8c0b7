"""Progress of a batch: a live rich display (done, running, failed, best speedups, spend), or one
log line per finished attempt with `--quiet`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agent.batch.config import WorkItem
from agent.batch.records import AttemptRecord


class ProgressState:
    """What both displays show; updated from the batch's worker threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total = 0
        self.title = ""
        self.skipped = 0
        self.correct = 0
        self.failed = 0
        self.errors = 0
        self.running: dict[str, float] = {}
        self.best: list[tuple[float, str]] = []
        self.tokens = 0
        self.usd = 0.0
        self.gpu_s = 0.0
        self.started_at = time.monotonic()
        self.activity: Callable[[], dict[str, int]] = dict
        self.notes: list[str] = []

    def start(self, total: int, title: str) -> None:
        with self.lock:
            self.total, self.title, self.started_at = total, title, time.monotonic()

    def stop(self) -> None:
        """The batch is over: a display draws its last frame (the state alone has nothing to end)."""

    def skip(self, item: WorkItem) -> None:
        with self.lock:
            self.skipped += 1

    def begin(self, item: WorkItem) -> None:
        with self.lock:
            self.running[item.label] = time.monotonic()

    def end(self, item: WorkItem, outcome: AttemptRecord) -> None:
        with self.lock:
            self.running.pop(item.label, None)
            self.tokens += outcome.tokens
            self.usd += outcome.usd
            self.gpu_s += outcome.gpu_s
            if outcome.status == "error":
                self.errors += 1
            elif outcome.verdict == "correct":
                self.correct += 1
                speed = outcome.speedup_eager
                if speed is not None:
                    self.best = sorted([*self.best, (speed, item.label)], reverse=True)[:5]
            else:
                self.failed += 1

    def note(self, message: str) -> None:
        with self.lock:
            self.notes = [*self.notes, message][-3:]

    @property
    def finished(self) -> int:
        return self.correct + self.failed + self.errors


class LiveProgress(ProgressState):
    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(stderr=True)
        self._live: Live | None = None

    def start(self, total: int, title: str) -> None:
        super().start(total, title)
        self._live = Live(
            get_renderable=self.render, console=self.console, refresh_per_second=2, transient=False
        )
        self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None

    def render(self) -> Group:
        with self.lock:
            elapsed = time.monotonic() - self.started_at
            head = Text.assemble(
                (f"{self.title}  ", "bold"),
                f"{self.finished + self.skipped}/{self.total} done ",
                (f"{self.correct} correct ", "green"),
                (f"{self.failed} failed ", "red"),
                (f"{self.errors} errors ", "yellow" if self.errors else "dim"),
                (f"({self.skipped} already recorded) ", "dim"),
                f"{len(self.running)} running  {elapsed:,.0f}s",
            )
            activity = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.activity().items())
            spend = Text(
                f"spend: {self.tokens:,} tokens, ${self.usd:,.2f}, GPU {self.gpu_s:,.0f}s"
                + (f"   [{activity}]" if activity else ""),
                style="dim",
            )
            table = Table(box=None, show_header=True, padding=(0, 2))
            table.add_column("running", overflow="ellipsis", max_width=60)
            table.add_column("for", justify="right")
            now = time.monotonic()
            for label, since in sorted(self.running.items(), key=lambda kv: kv[1])[:8]:
                table.add_row(Text(label), f"{now - since:,.0f}s")
            best = Text("best vs eager: " + ", ".join(f"{s:.2f}x {label}" for s, label in self.best[:5]))
            notes = [Text(n, style="yellow") for n in self.notes]
            return Group(head, spend, best, table, *notes)


class LogProgress(ProgressState):
    """`--quiet`: a line per finished attempt, on stderr, for logs."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)

    def start(self, total: int, title: str) -> None:
        super().start(total, title)
        self.console.print(f"{title}: {total} attempts", markup=False)

    def end(self, item: WorkItem, outcome: AttemptRecord) -> None:
        super().end(item, outcome)
        what = outcome.verdict or outcome.status
        speed = outcome.speedup_eager
        extra = f" {speed:.2f}x vs eager" if speed is not None else ""
        error = f" ({_last_line(outcome.error)[:200]})" if outcome.status == "error" and outcome.error else ""
        self.console.print(
            f"[{self.finished + self.skipped}/{self.total}] {item.label}: {what}{extra}{error} in {outcome.wall_s:.1f}s",
            markup=False,
        )

    def note(self, message: str) -> None:
        repeated = bool(self.notes) and self.notes[-1] == message
        super().note(message)
        if not repeated:  # a log says a thing once, however often it is noted
            self.console.print(message, markup=False)

    def stop(self) -> None:
        self.console.print(
            f"{self.title}: {self.correct} correct, {self.failed} failed, {self.errors} errors, "
            f"{self.skipped} already recorded",
            markup=False,
        )


class NullProgress(ProgressState):
    """Keeps the counts, shows nothing."""


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""

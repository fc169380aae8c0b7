"""Progress of a solve run for people: one live status line on a terminal, or log lines (`--quiet`)."""

from __future__ import annotations

import logging

from rich.console import Console
from rich.live import Live
from rich.text import Text

from agent.budget import format_count, format_duration
from agent.tools import ToolContext

log = logging.getLogger("agent.run.solve")


def status_line(ctx: ToolContext, note: str) -> str:
    usage, limits = ctx.budget.usage(), ctx.budget.limits
    best = ctx.candidates.best
    if best is None:
        best_text = "best: none yet"
    elif best.speedup is None:
        best_text = "best: correct, not timed"
    else:
        best_text = f"best: {best.speedup:.2f}x vs {ctx.candidates.baseline}"
    turns = f"turn {ctx.turn}" + (f"/{limits.turns}" if limits.turns else "")
    usd = "$?" if usage.usd_unknown and not usage.usd else f"${usage.usd:.2f}"
    return (
        f"{turns} · {best_text} · tokens {format_count(usage.in_tokens)} in / {format_count(usage.out_tokens)} out"
        f" · {usd} · gpu {format_duration(usage.gpu)} · wall {format_duration(usage.wall)} · {note}"
    )


class LiveStatus:
    """A status line redrawn in place (the wall clock keeps moving between events); use as a context
    manager around the run."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._state: tuple[ToolContext, str] | None = None
        self._live = Live(self, console=self.console, refresh_per_second=2, transient=True)

    def __call__(self, ctx: ToolContext, note: str) -> None:
        self._state = (ctx, note)

    def __rich__(self) -> Text:
        return Text("starting" if self._state is None else status_line(*self._state))

    def __enter__(self) -> LiveStatus:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()


class LogProgress:
    """One log line per tool result, for logs and non-interactive runs."""

    def __call__(self, ctx: ToolContext, note: str) -> None:
        if not note.startswith(("waiting", "running")):
            log.info(status_line(ctx, note))

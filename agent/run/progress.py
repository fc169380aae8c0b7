"""Progress of a solve run for people: one live status line on a terminal, or log lines (`--quiet`)."""

from __future__ import annotations

import logging

from rich.console import Console
from rich.live import Live
from rich.text import Text

from agent.budget import format_count, format_duration
from agent.tools import ToolContext

log = logging.getLogger("agent.run.solve")


SEPARATOR = " · "
DROP_ORDER = ("gpu", "tokens", "usd", "wall", "best")
"""The parts a narrow status line leaves out first; the turn and the current action stay."""


def status_line(ctx: ToolContext, note: str, width: int | None = None) -> str:
    """`turn 3/40 · best: ... · tokens ... · $ · gpu · wall · ACTION`; within `width` columns the
    least useful parts are left out first (DROP_ORDER), and only then is the action cut."""
    parts = status_parts(ctx)
    parts["note"] = note
    line = SEPARATOR.join(parts.values())
    if width is None:
        return line
    for name in DROP_ORDER:
        if len(line) <= width:
            break
        parts.pop(name, None)
        line = SEPARATOR.join(parts.values())
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


def status_parts(ctx: ToolContext) -> dict[str, str]:
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
    return {
        "turns": turns,
        "best": best_text,
        "tokens": f"tokens {format_count(usage.in_tokens)} in / {format_count(usage.out_tokens)} out",
        "usd": usd,
        "gpu": f"gpu {format_duration(usage.gpu)}",
        "wall": f"wall {format_duration(usage.wall)}",
    }


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
        line = "starting" if self._state is None else status_line(*self._state, width=self.console.width)
        return Text(line, no_wrap=True, overflow="ellipsis")

    def __enter__(self) -> LiveStatus:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()


class LogProgress:
    """One log line per tool result, for logs and non-interactive runs; a line that says the same as
    the one before it is not repeated."""

    def __init__(self) -> None:
        self._last: str | None = None

    def __call__(self, ctx: ToolContext, note: str) -> None:
        if note.startswith(("waiting", "running")):
            return
        line = status_line(ctx, note)
        if line != self._last:
            log.info(line)
            self._last = line

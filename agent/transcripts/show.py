"""`agent show` in the terminal: a transcript as turns, tool calls, file diffs, verdicts and cost."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from agent.transcripts.view import RunView, ToolStepView, TurnView

MAX_RESULT_LINES = 30
MAX_PROMPT_LINES = 12


def clip_lines(text: str, limit: int) -> str:
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    return "\n".join([*lines[:limit], f"[... {len(lines) - limit} more lines]"])


def render(view: RunView, console: Console, *, full: bool = False) -> None:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    for name, value in view.facts:
        facts.add_row(name, Text(value))
    console.print(Panel(facts, title=Text(view.title), title_align="left"))
    if view.truncated:
        console.print("[yellow]the last line was cut off mid-write (a killed run); shown up to the cut[/]")
    for turn in view.turns:
        console.print(_turn(turn, full=full))
    console.print(_end(view))


def _turn(turn: TurnView, *, full: bool) -> RenderableType:
    parts: list[RenderableType] = []
    for role, text in turn.prompts:
        shown = text if full else clip_lines(text, MAX_PROMPT_LINES)
        parts.append(Text.assemble((f"{role}: ", "bold magenta"), shown))
    if turn.text:
        parts.append(Text.assemble(("assistant: ", "bold cyan"), turn.text))
    for step in turn.steps:
        parts.append(_step(step, full=full))
    for verdict in turn.verdicts:
        color = "green" if verdict.verdict == "correct" else "red"
        speed = f" {verdict.speedup:.2f}x vs {verdict.baseline}" if verdict.speedup is not None else ""
        best = " [bold](best so far)[/]" if verdict.became_best else ""
        parts.append(
            Text.from_markup(f"[{color}]verdict ({verdict.source}): {verdict.verdict}{speed}[/]{best} ")
            + Text(f"— {verdict.reason}", style="dim")
        )
    cost = f"${turn.cost_usd:.4f}" if turn.cost_usd is not None else "unpriced"
    subtitle = (
        f"{turn.tokens_in:,} in / {turn.tokens_out:,} out tokens, {cost}, stop {turn.stop_reason or '-'}"
    )
    if turn.budget:
        parts.append(Text(f"budget: {turn.budget}", style="dim"))
    return Panel(
        Group(*parts),
        title=f"turn {turn.turn}",
        subtitle=subtitle,
        title_align="left",
        subtitle_align="right",
    )


def _step(step: ToolStepView, *, full: bool) -> RenderableType:
    mark = ("✗", "red") if step.is_error else ("✓", "green")
    head = Text.assemble(
        ("→ ", "bold"), (step.name, "bold yellow"), f"({step.arguments})" if step.arguments else "()"
    )
    parts: list[RenderableType] = [head]
    if step.diff is not None:
        parts.append(Syntax(step.diff, "diff", theme="ansi_dark", word_wrap=True))
    if step.answered:
        result = step.result if full else clip_lines(step.result, MAX_RESULT_LINES)
        parts.append(Text.assemble((f"{mark[0]} ", mark[1]), (result, "red" if step.is_error else "")))
    else:
        parts.append(Text("(no result recorded)", style="yellow"))
    return Group(*parts)


def _end(view: RunView) -> RenderableType:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("status", Text(view.status, style="green" if view.status == "submitted" else "yellow"))
    if view.end_message:
        table.add_row("message", Text(view.end_message))
    table.add_row("best", Text(view.best or "no verified solution"))
    if view.cost:
        table.add_row("cost", Text(view.cost))
    return Panel(table, title="run end", title_align="left")

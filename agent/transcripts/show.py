"""`agent show` in the terminal: a summary of the run first (outcome, best speedups, turns, cost,
time), then its turns, tool calls, file diffs and verdicts."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from agent.transcripts.format import EvaluationEvent, ModelResponseEvent, Transcript
from agent.transcripts.view import RunView, ToolStepView, TurnView

MAX_RESULT_LINES = 30
MAX_PROMPT_LINES = 12
MAX_TEXT_LINES = 40
MAX_DIFF_LINES = 60


def clip_lines(text: str, limit: int) -> str:
    lines = text.splitlines()
    if len(lines) <= limit:
        return text
    return "\n".join([*lines[:limit], f"... {len(lines) - limit} more lines (use --full)"])


class BaselineSpeedup(BaseModel):
    value: float
    outcome: str = ""  # the referee's call: faster, slower or within_noise


class RunSummary(BaseModel):
    """What a reader wants before the turns: how the run ended and what it cost."""

    task: str
    model: str
    outcome: str
    best_verdict: str | None = None
    best_turn: int | None = None
    vs_eager: BaselineSpeedup | None = None
    vs_compile: BaselineSpeedup | None = None
    turns: int
    in_tokens: int
    out_tokens: int
    usd: float
    usd_unknown: bool = False
    wall_s: float
    gpu_s: float


def summarize(transcript: Transcript) -> RunSummary:
    """The run's summary from its run_end; a run without one (killed) is summed from its events."""
    header, end = transcript.header, transcript.run_end
    # A region sub-workspace's verdicts are the region's own (open_region): the run's are the whole model's.
    evaluations = [e for e in transcript.events if isinstance(e, EvaluationEvent) and e.region is None]
    best_hash = end.best.content_hash if end and end.best else None
    if best_hash is None:
        best_hash = next((e.content_hash for e in reversed(evaluations) if e.became_best), None)
    of_best = [e for e in evaluations if e.content_hash == best_hash]
    timed = [e for e in of_best if _speedup(e, "speedup_vs_eager") or _speedup(e, "speedup_vs_compile")]
    # The submit's timing is the referee's last word on a candidate; else its latest profile.
    chosen = next((e for e in reversed(timed) if e.source == "submit"), timed[-1] if timed else None)
    if end is not None:
        usage = end.usage
        turns, in_tokens, out_tokens = usage.turns, usage.in_tokens, usage.out_tokens
        usd, usd_unknown, wall_s, gpu_s = usage.usd, usage.usd_unknown, usage.wall, usage.gpu
    else:
        responses = [e for e in transcript.events if isinstance(e, ModelResponseEvent)]
        turns = len({e.turn for e in responses})
        in_tokens = sum(e.response.usage.prompt_tokens for e in responses)
        out_tokens = sum(e.response.usage.output_tokens for e in responses)
        usd = sum(e.response.cost_usd or 0.0 for e in responses)
        usd_unknown = any(e.response.cost_usd is None for e in responses)
        wall_s = max((e.elapsed_s for e in transcript.events), default=0.0)
        gpu_s = sum(e.gpu_s for e in evaluations)
    return RunSummary(
        task=header.task.key,
        model=header.model,
        outcome=end.status if end else "unfinished (no run_end: the run was killed or is still running)",
        best_verdict=of_best[-1].verdict if of_best else None,
        best_turn=end.best.turn if end and end.best else (of_best[0].turn if of_best else None),
        vs_eager=_speedup(chosen, "speedup_vs_eager") if chosen else None,
        vs_compile=_speedup(chosen, "speedup_vs_compile") if chosen else None,
        turns=turns,
        in_tokens=in_tokens,
        out_tokens=out_tokens,
        usd=usd,
        usd_unknown=usd_unknown,
        wall_s=wall_s,
        gpu_s=gpu_s,
    )


def _speedup(event: EvaluationEvent, key: str) -> BaselineSpeedup | None:
    performance: Any = event.result.get("performance")
    speedup = performance.get(key) if isinstance(performance, dict) else None
    if not isinstance(speedup, dict) or not isinstance(speedup.get("value"), int | float):
        return None
    return BaselineSpeedup(value=float(speedup["value"]), outcome=str(speedup.get("outcome") or ""))


def summary_lines(summary: RunSummary) -> list[tuple[str, str]]:
    def speed(value: BaselineSpeedup | None, baseline: str) -> str:
        if value is None:
            return f"{baseline} not timed"
        call = f" ({value.outcome.replace('_', ' ')})" if value.outcome else ""
        return f"{value.value:.2f}x vs {baseline}{call}"

    if summary.best_verdict is None:
        best = "no candidate was judged"
    else:
        best = f"{summary.best_verdict} at turn {summary.best_turn}"
    cost = f"${summary.usd:.4f}{' (some calls unpriced)' if summary.usd_unknown else ''}"
    return [
        ("outcome", summary.outcome),
        ("best", best),
        ("speedup", f"{speed(summary.vs_eager, 'eager')}, {speed(summary.vs_compile, 'torch.compile')}"),
        ("turns", str(summary.turns)),
        ("tokens", f"{summary.in_tokens:,} in / {summary.out_tokens:,} out, {cost}"),
        ("time", f"wall {summary.wall_s:.1f} s, GPU {summary.gpu_s:.1f} s"),
    ]


def render_summary(summary: RunSummary, console: Console) -> None:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for name, value in summary_lines(summary):
        table.add_row(name, Text(value))
    console.print(Panel(table, title=Text(f"summary · {summary.task} · {summary.model}"), title_align="left"))


def render(view: RunView, console: Console, *, full: bool = False, summary: RunSummary | None = None) -> None:
    if summary is not None:
        render_summary(summary, console)
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
        said = turn.text if full else clip_lines(turn.text, MAX_TEXT_LINES)
        parts.append(Text.assemble(("assistant: ", "bold cyan"), said))
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
    mark = ("•", "dim") if step.compile_only else ("✗", "red") if step.is_error else ("✓", "green")
    head = Text.assemble(
        ("→ ", "bold"), (step.name, "bold yellow"), f"({step.arguments})" if step.arguments else "()"
    )
    parts: list[RenderableType] = [head]
    if step.diff is not None:
        diff = step.diff if full else clip_lines(step.diff, MAX_DIFF_LINES)
        parts.append(Syntax(diff, "diff", theme="ansi_dark", word_wrap=True))
    if step.answered:
        result = step.result if full else clip_lines(step.result, MAX_RESULT_LINES)
        failed = step.is_error and not step.compile_only
        parts.append(Text.assemble((f"{mark[0]} ", mark[1]), (result, "red" if failed else "")))
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

"""What `agent show` displays, built once from a transcript and rendered by agent.transcripts.show (terminal)
and agent.transcripts.show_html (a self-contained page)."""

from __future__ import annotations

import json

from pydantic import BaseModel

from agent.messages import SystemMessage, UserMessage
from agent.transcripts.files import FileHistory, file_history
from agent.transcripts.format import (
    BudgetEvent,
    EvaluationEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    ToolCallEvent,
    ToolResultEvent,
    Transcript,
)

_LONG_ARGUMENTS = ("content", "old_string", "new_string")


DRY_RUN_MARK = "compile-only dry run (--allow-no-gpu)"
"""What agent.tools.pipeline.DRY_RUN_NOTE says in a dry run's verify and profile results."""


class ToolStepView(BaseModel):
    call_id: str
    name: str
    arguments: str
    """The arguments as JSON, with file contents left out when the edit is shown as a diff."""
    path: str | None = None
    diff: str | None = None
    result: str = ""
    is_error: bool = False
    duration_s: float = 0.0
    answered: bool = False

    @property
    def compile_only(self) -> bool:
        """A verify or profile of a compile-only dry run: nothing could be judged, nothing failed."""
        return self.is_error and DRY_RUN_MARK in self.result


class VerdictView(BaseModel):
    source: str
    verdict: str
    reason: str
    speedup: float | None
    baseline: str
    became_best: bool
    content_hash: str


class TurnView(BaseModel):
    turn: int
    prompts: list[tuple[str, str]] = []
    """(role, text) of system prompts and user messages sent before this turn (not tool results)."""
    text: str = ""
    model: str = ""
    stop_reason: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    steps: list[ToolStepView] = []
    verdicts: list[VerdictView] = []
    budget: str | None = None


class RunView(BaseModel):
    title: str
    facts: list[tuple[str, str]]
    turns: list[TurnView]
    status: str
    end_message: str = ""
    best: str | None = None
    cost: str = ""
    truncated: bool = False


def build_view(transcript: Transcript) -> RunView:
    header = transcript.header
    history = file_history(transcript)
    turns: dict[int, TurnView] = {}
    steps: dict[tuple[int, str], ToolStepView] = {}

    def turn_of(number: int) -> TurnView:
        return turns.setdefault(number, TurnView(turn=number))

    for event in transcript.events:
        view = turn_of(event.turn) if event.turn else None
        if view is None:
            continue
        if isinstance(event, ModelRequestEvent):
            view.prompts.extend(
                (m.role, m.text) for m in event.messages if isinstance(m, SystemMessage | UserMessage)
            )
        elif isinstance(event, ModelResponseEvent):
            response = event.response
            view.text, view.model, view.stop_reason = (
                response.message.text,
                response.model,
                response.stop_reason,
            )
            view.tokens_in, view.tokens_out = response.usage.prompt_tokens, response.usage.output_tokens
            view.cost_usd = response.cost_usd
        elif isinstance(event, ToolCallEvent):
            step = _step(event, history)
            steps[(event.turn, event.call.id)] = step
            view.steps.append(step)
        elif isinstance(event, ToolResultEvent):
            step = steps.get((event.turn, event.tool_call_id))
            if step is not None:
                step.result, step.is_error, step.answered = event.content, event.is_error, True
                step.duration_s = event.duration_s
        elif isinstance(event, EvaluationEvent):
            view.verdicts.append(
                VerdictView(
                    source=event.source
                    if event.region is None
                    else f"{event.source}, region r{event.region:02d}",
                    verdict=event.verdict,
                    reason=event.reason,
                    speedup=event.speedup,
                    baseline=event.baseline,
                    became_best=event.became_best,
                    content_hash=event.content_hash,
                )
            )
        elif isinstance(event, BudgetEvent):
            u = event.usage
            view.budget = f"turns {u.turns}, tokens {u.in_tokens:,} in / {u.out_tokens:,} out, ${u.usd:.4f}, GPU {u.gpu:.1f} s, wall {u.wall:.1f} s"
    end = transcript.run_end
    usage = end.usage if end else None
    return RunView(
        title=f"{header.task.name} · {header.model}",
        facts=[
            ("task", f"{header.task.key} ({header.task.inputs or 'inputs unknown'})"),
            ("model", header.model),
            ("gpu", header.gpu or "none (compile-only)"),
            ("started", header.started_at),
            ("run id", header.run_id),
            ("sandbox", header.sandbox),
            ("versions", ", ".join(f"{k} {v}" for k, v in sorted(header.versions.items()))),
        ],
        turns=[turns[number] for number in sorted(turns)],
        status=end.status if end else "unfinished (no run_end: the run was killed or is still running)",
        end_message=end.message if end else "",
        best=_best_line(end.best.verdict, end.best.speedup, end.best.turn, end.best.content_hash)
        if end and end.best
        else None,
        cost=(
            f"${usage.usd:.4f}{' (some calls unpriced)' if usage.usd_unknown else ''}, "
            f"{usage.turns} turns, {usage.in_tokens:,} tokens in / {usage.out_tokens:,} out, "
            f"GPU {usage.gpu:.1f} s, wall {usage.wall:.1f} s"
            if usage
            else ""
        ),
        truncated=transcript.truncated,
    )


def _best_line(verdict: str, speedup: float | None, turn: int, content_hash: str) -> str:
    speed = f", {speedup:.2f}x" if speedup is not None else ""
    return f"{verdict}{speed} (turn {turn}, content {content_hash[:10]})"


def _step(event: ToolCallEvent, history: FileHistory) -> ToolStepView:
    call = event.call
    edit = history.edit_for(call.id, event.turn)
    if call.arguments is None:
        arguments = call.raw_arguments
    else:
        shown = {k: v for k, v in call.arguments.items() if edit is None or k not in _LONG_ARGUMENTS}
        arguments = json.dumps(shown, ensure_ascii=False) if shown else ""
    return ToolStepView(
        call_id=call.id,
        name=call.name,
        arguments=arguments,
        path=edit.path if edit else None,
        diff=edit.diff() if edit else None,
    )

"""Training data from transcripts (docs/transcript-format.md, "Export").

- openai-chat: one line per run: `messages` (system, user, assistant with `tool_calls`, tool) and
  `tools` (function schemas), the OpenAI chat fine-tuning format.
- rl-steps: one line per model turn: the conversation before the turn, the turn, its tool results,
  and rewards computed from the referee's verdicts alone (`reward`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from agent.messages import AssistantMessage, Message, SystemMessage, ToolResultMessage, ToolSpec, UserMessage
from agent.transcripts.format import (
    EvaluationEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    ToolResultEvent,
    Transcript,
)
from agent.verdicts import Verdict

ExportFormat = Literal["openai-chat", "rl-steps"]
FAILURE_VERDICTS: frozenset[Verdict] = frozenset(
    {"compile_error", "runtime_error", "timeout", "policy_violation"}
)


class ExportFilter(BaseModel):
    only_correct: bool = False
    only_faster: bool = False
    min_speedup: float | None = None


class RunOutcome(BaseModel):
    """The run's final solution as the referee judged it: the best verified one, else the last verdict."""

    verdict: Verdict | None = None
    speedup: float | None = None
    reward: float | None = None
    faster: bool = False


def reward(verdict: Verdict, result: dict[str, Any]) -> float | None:
    """-1 failure (compile, runtime, timeout, policy violation); 0 incorrect; 1 correct; 2 correct and
    faster than eager beyond noise; 3 also faster than torch.compile beyond noise. None when the
    referee could not judge (no_gpu, referee_error): not a signal about the model."""
    if verdict in FAILURE_VERDICTS:
        return -1.0
    if verdict == "incorrect":
        return 0.0
    if verdict != "correct":
        return None
    performance = result.get("performance") or {}
    eager = (performance.get("speedup_vs_eager") or {}).get("outcome") == "faster"
    compiled = (performance.get("speedup_vs_compile") or {}).get("outcome") == "faster"
    return 3.0 if eager and compiled else 2.0 if eager else 1.0


def run_outcome(transcript: Transcript) -> RunOutcome:
    evaluations: list[EvaluationEvent] = transcript.of_type(EvaluationEvent)
    if not evaluations:
        return RunOutcome()
    end = transcript.run_end
    best = end.best if end else None
    if best is not None:
        chosen = [e for e in evaluations if e.content_hash == best.content_hash and e.verdict == "correct"]
    else:
        chosen = [e for e in evaluations if e.verdict == "correct"]
    timed = [e for e in chosen if e.speedup is not None]
    event = max(timed, key=lambda e: e.speedup or 0.0) if timed else (chosen or evaluations)[-1]
    outcome = reward(event.verdict, event.result)
    return RunOutcome(
        verdict=event.verdict, speedup=event.speedup, reward=outcome, faster=(outcome or 0) >= 2
    )


def keep(transcript: Transcript, rules: ExportFilter) -> bool:
    outcome = run_outcome(transcript)
    if rules.only_correct and outcome.verdict != "correct":
        return False
    if rules.only_faster and not outcome.faster:
        return False
    return rules.min_speedup is None or (outcome.speedup is not None and outcome.speedup >= rules.min_speedup)


def openai_message(message: Message) -> dict[str, Any]:
    match message:
        case SystemMessage() | UserMessage():
            return {"role": message.role, "content": message.text}
        case AssistantMessage():
            out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                out["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.raw_arguments},
                    }
                    for c in message.tool_calls
                ]
            return out
        case ToolResultMessage():
            return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}


def openai_tools(specs: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": s.name, "description": s.description, "parameters": s.parameters},
        }
        for s in specs
    ]


def chat_record(transcript: Transcript) -> dict[str, Any]:
    return {
        "messages": [openai_message(m) for m in transcript.conversation()],
        "tools": openai_tools(transcript.header.tools),
    }


def step_records(transcript: Transcript) -> Iterator[dict[str, Any]]:
    """One record per model turn. `reward` is the last verdict the turn's tool calls produced (None when
    it judged nothing); `outcome_reward` is the run's final solution's, the same on every step."""
    header, outcome = transcript.header, run_outcome(transcript)
    history: list[Message] = []
    by_turn: dict[int, dict[str, list[Any]]] = {}
    for event in transcript.events:
        slot = by_turn.setdefault(event.turn, {"results": [], "evaluations": []})
        if isinstance(event, ToolResultEvent):
            slot["results"].append(event)
        elif isinstance(event, EvaluationEvent):
            slot["evaluations"].append(event)
    responses = {e.turn: e for e in transcript.of_type(ModelResponseEvent)}
    last_turn = max(responses, default=0)
    for event in transcript.events:
        if isinstance(event, ModelRequestEvent):
            history.extend(event.messages)
            continue
        if not isinstance(event, ModelResponseEvent):
            continue
        slot = by_turn.get(event.turn, {"results": [], "evaluations": []})
        judged: list[EvaluationEvent] = slot["evaluations"]
        last = judged[-1] if judged else None
        yield {
            "run_id": header.run_id,
            "task": header.task.key,
            "model": header.model,
            "gpu": header.gpu,
            "turn": event.turn,
            "observation": [openai_message(m) for m in history],
            "action": openai_message(event.response.message),
            "tool_results": [
                {
                    "tool_call_id": r.tool_call_id,
                    "name": r.tool_name,
                    "content": r.content,
                    "is_error": r.is_error,
                }
                for r in slot["results"]
            ],
            "verdict": last.verdict if last else None,
            "speedup": last.speedup if last else None,
            "reward": reward(last.verdict, last.result) if last else None,
            "outcome_reward": outcome.reward,
            "done": event.turn == last_turn,
        }
        history.append(event.response.message)


def export(
    transcripts: Iterable[Transcript], fmt: ExportFormat, rules: ExportFilter, out: Path
) -> tuple[int, int]:
    """Write the kept transcripts to `out` (JSONL); returns (runs kept, lines written)."""
    kept = lines = 0
    with Path(out).open("w", encoding="utf-8") as handle:
        for transcript in transcripts:
            if not keep(transcript, rules):
                continue
            kept += 1
            records = [chat_record(transcript)] if fmt == "openai-chat" else list(step_records(transcript))
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                lines += 1
    return kept, lines

"""Where a replay's tool results differ from the recording: pure functions over recorded events.

What counts: the compile outcome (ok or failed), the referee's verdict, the files judged (content
hash), the speedups beyond noise, and the exact text of deterministic tools (file and skill tools).
Timings, build logs and durations are not compared. Two speedups agree when they differ by no more
than the sum of their noise half-widths (the referee's `low`..`high` band around each median).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from agent.transcript import EvaluationEvent, ToolResultEvent, Transcript

DETERMINISTIC_TOOLS = frozenset(
    {"list_files", "read_file", "write_file", "edit_file", "list_skills", "read_skill"}
)
_EPS = 1e-9


class SpeedupBand(BaseModel):
    value: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return max(0.0, (self.high - self.low) / 2)

    def describe(self) -> str:
        return f"{self.value:.2f}x ±{self.half_width:.2f}"


class Observation(BaseModel):
    """What one tool call produced, reduced to what a replay must reproduce."""

    turn: int
    call_id: str
    tool: str
    is_error: bool
    content: str
    compile_ok: bool | None = None
    compile_error: str | None = None
    verdict: str | None = None
    content_hash: str | None = None
    speedups: dict[str, SpeedupBand] = {}


class Difference(BaseModel):
    kind: Literal["step", "compile", "verdict", "files", "speedup", "result", "outcome"]
    recorded: str
    replayed: str


class StepComparison(BaseModel):
    index: int
    turn: int
    tool: str
    call_id: str
    status: Literal["match", "diverge", "missing", "extra"]
    differences: list[Difference] = []


def speedups_agree(a: SpeedupBand, b: SpeedupBand) -> bool:
    return abs(a.value - b.value) <= a.half_width + b.half_width + _EPS


def observation_from(result: ToolResultEvent, evaluation: EvaluationEvent | None = None) -> Observation:
    data = result.data or {}
    obs = Observation(
        turn=result.turn,
        call_id=result.tool_call_id,
        tool=result.tool_name,
        is_error=result.is_error,
        content=result.content,
        verdict=data.get("verdict"),
        content_hash=data.get("content_hash"),
    )
    if "ok" in data:
        errors = data.get("errors") or []
        obs.compile_ok = bool(data["ok"])
        obs.compile_error = str(errors[0]) if errors and not data["ok"] else None
    if evaluation is not None:
        apply_evaluation(
            obs, evaluation.verdict, evaluation.reason, evaluation.content_hash, evaluation.result
        )
    return obs


def apply_evaluation(
    obs: Observation, verdict: str, reason: str, content_hash: str, result: dict[str, Any]
) -> None:
    """Fill `obs` from a referee result (an EvalResult as JSON)."""
    obs.verdict, obs.content_hash = verdict, content_hash
    compiled = result.get("compile") or {}
    if "ok" in compiled:
        obs.compile_ok = bool(compiled["ok"])
        if not obs.compile_ok:
            obs.compile_error = obs.compile_error or reason
    performance = result.get("performance") or {}
    for baseline in ("eager", "compile"):
        measured = performance.get(f"speedup_vs_{baseline}")
        if measured:
            obs.speedups[baseline] = SpeedupBand(
                value=measured["value"], low=measured["low"], high=measured["high"]
            )


def observations(transcript: Transcript) -> list[Observation]:
    """One observation per tool result, in order, with the verdict the call produced (if any)."""
    found: list[Observation] = []
    pending: EvaluationEvent | None = None
    for event in transcript.events:
        if isinstance(event, EvaluationEvent):
            pending = event
        elif isinstance(event, ToolResultEvent):
            found.append(observation_from(event, pending))
            pending = None
    return found


def compare(recorded: Observation, replayed: Observation) -> list[Difference]:
    if (recorded.tool, recorded.call_id) != (replayed.tool, replayed.call_id):
        return [
            Difference(
                kind="step",
                recorded=f"{recorded.tool} ({recorded.call_id})",
                replayed=f"{replayed.tool} ({replayed.call_id})",
            )
        ]
    found: list[Difference] = []
    if (
        recorded.compile_ok is not None
        and replayed.compile_ok is not None
        and recorded.compile_ok != replayed.compile_ok
    ):
        found.append(
            Difference(kind="compile", recorded=_compile_text(recorded), replayed=_compile_text(replayed))
        )
    if recorded.verdict != replayed.verdict:
        found.append(
            Difference(kind="verdict", recorded=str(recorded.verdict), replayed=str(replayed.verdict))
        )
    if recorded.content_hash and replayed.content_hash and recorded.content_hash != replayed.content_hash:
        found.append(
            Difference(kind="files", recorded=recorded.content_hash[:12], replayed=replayed.content_hash[:12])
        )
    for baseline in sorted(set(recorded.speedups) | set(replayed.speedups)):
        a, b = recorded.speedups.get(baseline), replayed.speedups.get(baseline)
        if a is None or b is None or not speedups_agree(a, b):
            found.append(
                Difference(
                    kind="speedup",
                    recorded=f"{a.describe() if a else 'not timed'} vs {baseline}",
                    replayed=f"{b.describe() if b else 'not timed'} vs {baseline}",
                )
            )
    if recorded.tool in DETERMINISTIC_TOOLS and recorded.content != replayed.content:
        found.append(
            Difference(kind="result", recorded=recorded.content[:300], replayed=replayed.content[:300])
        )
    if not found and recorded.is_error != replayed.is_error:
        found.append(Difference(kind="outcome", recorded=_outcome(recorded), replayed=_outcome(replayed)))
    return found


def compare_runs(recorded: list[Observation], replayed: list[Observation]) -> list[StepComparison]:
    steps: list[StepComparison] = []
    for index in range(max(len(recorded), len(replayed))):
        a = recorded[index] if index < len(recorded) else None
        b = replayed[index] if index < len(replayed) else None
        shown = a or b
        assert shown is not None
        if a is None or b is None:
            status: Literal["missing", "extra"] = "missing" if b is None else "extra"
            steps.append(
                StepComparison(
                    index=index + 1, turn=shown.turn, tool=shown.tool, call_id=shown.call_id, status=status
                )
            )
            continue
        differences = compare(a, b)
        steps.append(
            StepComparison(
                index=index + 1,
                turn=a.turn,
                tool=a.tool,
                call_id=a.call_id,
                status="diverge" if differences else "match",
                differences=differences,
            )
        )
    return steps


def _compile_text(obs: Observation) -> str:
    if obs.compile_ok:
        return "compiled"
    return f"failed: {obs.compile_error}" if obs.compile_error else "failed"


def _outcome(obs: Observation) -> str:
    return "error" if obs.is_error else "ok"

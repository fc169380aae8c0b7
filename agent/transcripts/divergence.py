"""Where a replay's tool results differ from the recording: pure functions over recorded events.

What counts: the compile outcome (ok or failed), the referee's verdict, the files judged (content
hash), the speedups beyond noise, and the exact text of deterministic tools (file and skill tools).
Timings, build logs and durations are not compared.

Two speedups a and b (same step, same baseline) agree when either holds:

1. in-run: |a - b| <= a.half_width + b.half_width, the referee's `low`..`high` band around each
   median (half the IQR of that run's repetitions, at least agent.referee's 2% floor);
2. run-to-run: |a - b| <= k * sqrt(2) * cv * (a + b) / 2.

The in-run band only sees the spread inside one process; a replay is another process, whose median
moves by more. `cv` is that between-run spread, relative to the speedup: by default 3.74%, the
largest CV of the speedup vs eager over 5 evaluations of one solution in separate processes on the
H200 that we measured (benchmarks/results/eval_bench_h200*.md, `python benchmarks/eval_bench.py`:
1.58% on 2026-11-29; on 2026-12-01 0.88% at 08:03, then 3.74% and 3.36% on machines whose host
stages ran slower; 0.38-1.52% after the timing stopped at the current stream's end, 15:00-15:25,
but transcripts recorded before then carry the old spread); `agent replay
--run-to-run-cv` overrides it (0 keeps the in-run rule alone). Two independent runs each with
relative standard deviation cv differ by a standard deviation of sqrt(2) * cv * mean; k = 3 sigma
makes a false divergence about 0.3% likely per speedup compared (under a normal spread), at most
about 2% for a replay with six speedups (three timed steps, two baselines). k = 2 would raise a
false alarm in one replay in eight to one in four. The default was measured with the baselines
cached, so it is the candidate's spread alone, which is what a replay on the recording machine sees
(the baselines come from the same cache); on another machine the baselines are timed again and
their spread adds. docs/transcript-format.md ("When two speedups agree") has a worked example.

Whatever the tolerance, a speedup that crosses 1.0 outside noise (one band wholly above 1.0, the
other wholly below) diverges: the referee would call one run faster and the other slower. A change
of verdict, compile outcome or content hash diverges whatever the speedups do.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent.transcripts.format import EvaluationEvent, ToolResultEvent, Transcript

DETERMINISTIC_TOOLS = frozenset(
    {"list_files", "read_file", "write_file", "edit_file", "list_skills", "read_skill"}
)
_EPS = 1e-9

DEFAULT_RUN_TO_RUN_CV = 0.0374
"""benchmarks/results/eval_bench_h200*.md: the largest measured CV of the speedup vs eager, H200."""
DEFAULT_SIGMAS = 3.0


class SpeedupBand(BaseModel):
    value: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return max(0.0, (self.high - self.low) / 2)

    def describe(self) -> str:
        return f"{self.value:.2f}x ±{self.half_width:.2f}"


class NoiseRule(BaseModel):
    """How far apart two speedups may be and still agree (see the module's docstring)."""

    run_to_run_cv: float = Field(default=DEFAULT_RUN_TO_RUN_CV, ge=0.0, lt=1.0)
    sigmas: float = Field(default=DEFAULT_SIGMAS, gt=0.0)

    def run_to_run_tolerance(self, a: SpeedupBand, b: SpeedupBand) -> float:
        return self.sigmas * math.sqrt(2) * self.run_to_run_cv * (a.value + b.value) / 2

    def describe(self) -> str:
        return (
            f"speedups agree within their in-run bands or within {self.sigmas:g} sigma of a "
            f"{100 * self.run_to_run_cv:.2f}% run-to-run CV ({self.sigmas:g} * sqrt(2) * cv * mean)"
        )


class SpeedupCheck(BaseModel):
    """One speedup compared, with the numbers a reader needs to see how close it was."""

    baseline: str
    recorded: SpeedupBand | None
    replayed: SpeedupBand | None
    difference: float | None = None
    """|recorded - replayed|"""
    in_run_tolerance: float | None = None
    run_to_run_tolerance: float | None = None
    tolerance: float | None = None
    """The larger of the two: what `difference` had to stay within."""
    run_to_run_sigmas: float | None = None
    """`difference` in standard deviations of the difference of two runs (null when cv is 0)."""
    agree: bool
    reason: Literal["in-run bands", "run-to-run", "beyond noise", "crosses 1.0", "not timed"]

    def describe(self) -> str:
        a = self.recorded.describe() if self.recorded else "not timed"
        b = self.replayed.describe() if self.replayed else "not timed"
        head = f"vs {self.baseline}: {a} → {b}"
        if self.difference is None or self.tolerance is None:
            return f"{head}: not timed on one side"
        sign = "≤" if self.difference <= self.tolerance + _EPS else ">"
        sigmas = f", {self.run_to_run_sigmas:.1f} sigma" if self.run_to_run_sigmas is not None else ""
        return (
            f"{head}: |Δ| {self.difference:.3f}{sigmas} {sign} tolerance {self.tolerance:.3f} "
            f"(in-run {self.in_run_tolerance:.3f}, run-to-run {self.run_to_run_tolerance:.3f}): "
            f"{'agree' if self.agree else 'diverge'} ({self.reason})"
        )


def check_speedup(
    baseline: str, a: SpeedupBand | None, b: SpeedupBand | None, rule: NoiseRule | None = None
) -> SpeedupCheck:
    rule = rule or NoiseRule()
    if a is None or b is None:
        return SpeedupCheck(baseline=baseline, recorded=a, replayed=b, agree=False, reason="not timed")
    difference = abs(a.value - b.value)
    in_run = a.half_width + b.half_width
    run_to_run = rule.run_to_run_tolerance(a, b)
    sigma = run_to_run / rule.sigmas
    crosses = (a.low > 1.0 and b.high < 1.0) or (a.high < 1.0 and b.low > 1.0)
    reason: Literal["in-run bands", "run-to-run", "beyond noise", "crosses 1.0"]
    if crosses:
        reason = "crosses 1.0"
    elif difference <= in_run + _EPS:
        reason = "in-run bands"
    elif difference <= run_to_run + _EPS:
        reason = "run-to-run"
    else:
        reason = "beyond noise"
    return SpeedupCheck(
        baseline=baseline,
        recorded=a,
        replayed=b,
        difference=difference,
        in_run_tolerance=in_run,
        run_to_run_tolerance=run_to_run,
        tolerance=max(in_run, run_to_run),
        run_to_run_sigmas=difference / sigma if sigma > 0 else None,
        agree=reason in ("in-run bands", "run-to-run"),
        reason=reason,
    )


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
    detail: str | None = None


class StepComparison(BaseModel):
    index: int
    turn: int
    tool: str
    call_id: str
    status: Literal["match", "diverge", "missing", "extra"]
    differences: list[Difference] = []
    speedups: list[SpeedupCheck] = []
    """Every speedup this step timed on either side, agreeing or not."""


def speedups_agree(a: SpeedupBand, b: SpeedupBand, rule: NoiseRule | None = None) -> bool:
    return check_speedup("eager", a, b, rule).agree


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


def speedup_checks(
    recorded: Observation, replayed: Observation, rule: NoiseRule | None = None
) -> list[SpeedupCheck]:
    return [
        check_speedup(baseline, recorded.speedups.get(baseline), replayed.speedups.get(baseline), rule)
        for baseline in sorted(
            set(recorded.speedups) | set(replayed.speedups), key=lambda name: (name != "eager", name)
        )
    ]


def compare(recorded: Observation, replayed: Observation, rule: NoiseRule | None = None) -> list[Difference]:
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
    for check in speedup_checks(recorded, replayed, rule):
        if not check.agree:
            a, b = check.recorded, check.replayed
            found.append(
                Difference(
                    kind="speedup",
                    recorded=f"{a.describe() if a else 'not timed'} vs {check.baseline}",
                    replayed=f"{b.describe() if b else 'not timed'} vs {check.baseline}",
                    detail=check.describe(),
                )
            )
    if recorded.tool in DETERMINISTIC_TOOLS and recorded.content != replayed.content:
        found.append(
            Difference(kind="result", recorded=recorded.content[:300], replayed=replayed.content[:300])
        )
    if not found and recorded.is_error != replayed.is_error:
        found.append(Difference(kind="outcome", recorded=_outcome(recorded), replayed=_outcome(replayed)))
    return found


def compare_runs(
    recorded: list[Observation], replayed: list[Observation], rule: NoiseRule | None = None
) -> list[StepComparison]:
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
        differences = compare(a, b, rule)
        same_call = not any(d.kind == "step" for d in differences)
        steps.append(
            StepComparison(
                index=index + 1,
                turn=a.turn,
                tool=a.tool,
                call_id=a.call_id,
                status="diverge" if differences else "match",
                differences=differences,
                speedups=speedup_checks(a, b, rule) if same_call else [],
            )
        )
    return steps


def _compile_text(obs: Observation) -> str:
    if obs.compile_ok:
        return "compiled"
    return f"failed: {obs.compile_error}" if obs.compile_error else "failed"


def _outcome(obs: Observation) -> str:
    return "error" if obs.is_error else "ok"

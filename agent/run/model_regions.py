"""What a model did region by region (the region tools, agent/tools/regions.py), read back from its
transcript: the turns it spent in each region it opened, what the referee said there, the
compositions it judged on the whole task and which one it submitted. The same `RegionRun` record the
template policy writes (regions.json), so `agent batch` and the reports show both alike; `allocation`
is "model": the model chose where its budget went."""

from __future__ import annotations

from agent.referee.results import EvalResult
from agent.regions.hot import HotRegion, HotRegionTable
from agent.run.region_compose import composition_trial, speedups
from agent.run.region_records import RegionResult, RegionRun, RegionStatus
from agent.transcripts.format import EvaluationEvent, ToolResultEvent, Transcript

OPEN, WHOLE, COMPOSE = "open_region", "open_whole_model", "compose_regions"


def region_run_of(transcript: Transcript, hot: HotRegionTable) -> RegionRun | None:
    """The run's regions record, or None when the model never opened a region."""
    turns: dict[int, int] = {}
    current: int | None = None
    calls = 0
    compositions: list[tuple[list[int], EvaluationEvent | None]] = []
    last_whole: EvaluationEvent | None = None
    for event in transcript.events:
        if isinstance(event, EvaluationEvent) and event.region is None:
            last_whole = event
        if not isinstance(event, ToolResultEvent):
            continue
        calls += 1
        data = event.data or {}
        if event.tool_name == OPEN and not event.is_error and "region" in data:
            current = int(data["region"])
            turns[current] = turns.get(current, 0) + 1
        elif event.tool_name in (WHOLE, COMPOSE):
            current = None
            if event.tool_name == COMPOSE and "composed" in data:
                compositions.append(([int(i) for i in data["composed"]], last_whole))
        elif current is not None:
            turns[current] = turns.get(current, 0) + 1
    if not turns:
        return None
    judged = [e for e in transcript.of_type(EvaluationEvent) if e.region is not None]
    end = transcript.run_end
    final = end.submitted or end.best if end is not None else None
    submitted = next(
        (
            regions
            for regions, e in reversed(compositions)
            if e is not None and final and e.content_hash == final.content_hash
        ),
        None,
    )
    whole = next((e for regions, e in reversed(compositions) if regions == submitted and e is not None), None)
    results = [
        _region_result(
            row, turns.get(row.region, 0), [e for e in judged if e.region == row.region], submitted
        )
        for row in hot.regions
    ]
    return RegionRun(
        task=hot.task,
        allocation="model",
        times=hot.source if hot.measured else f"{hot.source} (estimated)",
        total_units=calls,
        covered_share=hot.covered_share,
        regions=results,
        compositions=[
            composition_trial(regions, _judged(e), e.baseline) for regions, e in compositions if e is not None
        ],
        submitted=submitted,
        speedup_eager=speedups(_judged(whole))[0] if whole is not None else None,
        speedup_compile=speedups(_judged(whole))[1] if whole is not None else None,
    )


def _region_result(
    row: HotRegion, turns: int, judged: list[EvaluationEvent], submitted: list[int] | None
) -> RegionResult:
    correct = [e for e in judged if e.verdict == "correct"]
    best = max(correct, key=lambda e: e.speedup or 0.0, default=None)
    eager, compiled = speedups(_judged(best)) if best is not None else (None, None)
    status: RegionStatus
    if submitted is not None and row.region in submitted:
        status = "kept"
    elif not turns:
        status = "not run"
    elif best is None:
        status = "failed"
    else:
        status = "dropped"  # verified, and not in the composition submitted (if any was)
    return RegionResult(
        region=row.region,
        label=row.label,
        kind=row.kind,
        share=row.share,
        covered=row.covered,
        reason=row.not_covered_reason,
        units=turns,
        spent=len(judged),
        speedup_eager=eager,
        speedup_compile=compiled,
        status=status,
    )


def _judged(event: EvaluationEvent) -> EvalResult:
    """The referee's result an evaluation event recorded (written by this run: the current schema)."""
    return EvalResult.model_validate(event.result)

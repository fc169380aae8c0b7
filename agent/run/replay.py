"""Replaying a transcript: the recorded assistant turns go back through the loop against a real
sandbox (every tool call re-runs), and the new tool results are compared with the recorded ones
(agent.transcripts.divergence). `rejudge_final` re-judges only the run's best solution, rebuilt from the
transcript's file edits.

The replay runs on this machine: its GPU (another one than recorded, or none with a test referee),
its sandbox, and the recorded turns whichever model wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from agent.messages import Message, ModelResponse, ToolSpec
from agent.models.replay import ReplayModel
from agent.run.context import first_request_difference, recorded_elisions
from agent.run.solve import SolveConfig, solve
from agent.stops import RunStop
from agent.tasks import Task, load_task
from agent.tools.candidates import Referee, RefereeAdapter
from agent.transcripts.divergence import (
    NoiseRule,
    Observation,
    SpeedupCheck,
    StepComparison,
    apply_evaluation,
    compare_runs,
    observations,
)
from agent.transcripts.files import file_history
from agent.transcripts.format import EvaluationEvent, Header, ModelResponseEvent, Transcript
from agent.transcripts.reader import load_transcript, read_transcript
from agent.workspace import Snapshot, Workspace
from sandbox.base import open_sandbox


class ReplayError(Exception):
    """The replay cannot start; the message says why."""


class ReplayDiverged(RunStop):
    status = "replay_diverged"


class ReplayReport(BaseModel):
    transcript: Path
    out: Path
    mode: Literal["full", "final"]
    recorded_gpu: str | None
    replay_gpu: str | None
    recorded_status: str | None
    replay_status: str
    stopped_early: bool = False
    noise: NoiseRule = NoiseRule()
    """The speedup rule the steps were compared with (agent.transcripts.divergence)."""
    steps: list[StepComparison]
    request_difference: int | None = None
    """The first model request (1-based) whose messages, tool-call ids or elided messages differ from
    the recording's; None when every request both runs made matches."""

    @property
    def diverged(self) -> bool:
        return self.request_difference is not None or any(step.status != "match" for step in self.steps)

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for step in self.steps:
            found[step.status] = found.get(step.status, 0) + 1
        return found

    def summary(self) -> str:
        counts = ", ".join(f"{n} {status}" for status, n in sorted(self.counts().items()))
        if not self.diverged:
            closest = self.closest_speedup()
            margin = ""
            if closest is not None:
                share, step, check = closest
                margin = (
                    f"; closest speedup: step {step.index} ({step.call_id}) vs {check.baseline}, "
                    f"|Δ| {check.difference:.3f} = {100 * share:.0f}% of its tolerance {check.tolerance:.3f}"
                )
            return f"no divergence beyond noise ({counts}); replay status {self.replay_status}{margin}"
        first = next((step for step in self.steps if step.status != "match"), None)
        if first is None:
            return f"request {self.request_difference} differs from the recording's ({counts})"
        stop = "; stopped at the first divergence" if self.stopped_early else ""
        return f"diverged at step {first.index} ({first.tool}, turn {first.turn}): {counts}{stop}"

    def closest_speedup(self) -> tuple[float, StepComparison, SpeedupCheck] | None:
        """The compared speedup that used the largest share of its tolerance, with that share."""
        shares = [
            (check.difference / check.tolerance, step, check)
            for step in self.steps
            for check in step.speedups
            if check.difference is not None and check.tolerance
        ]
        return max(shares, key=lambda found: found[0]) if shares else None


class _CheckedReplay(ReplayModel):
    """A ReplayModel that, before each next turn, compares the tool results so far and stops the run
    at the first divergence (the replay's transcript is flushed line by line, so it can be read)."""

    def __init__(
        self, responses: Sequence[ModelResponse], recorded: list[Observation], live: Path, rule: NoiseRule
    ) -> None:
        super().__init__(responses, name="replay")
        self.recorded = recorded
        self.live = live
        self.rule = rule

    def query(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], *, max_output_tokens: int | None = None
    ) -> ModelResponse:
        if self.calls:
            so_far = observations(read_transcript(self.live))
            steps = compare_runs(self.recorded[: len(so_far)], so_far, self.rule)
            diverged = next((s for s in steps if s.status != "match"), None)
            if diverged is not None:
                raise ReplayDiverged(f"tool results diverge from the recording at step {diverged.index}")
        return super().query(messages, tools, max_output_tokens=max_output_tokens)


def resolve_task(header: Header, override: Path | None = None, *, sandbox_kind: str = "local") -> Task:
    """The recorded task: `override`, else the recorded path, else the same relative path under the
    current folder (a transcript recorded on another machine). The file must not have changed."""
    recorded = Path(header.task.path)
    candidates = (
        [override]
        if override
        else [recorded, *(Path(*recorded.parts[i:]) for i in range(1, len(recorded.parts)))]
    )
    path = next((p for p in candidates if p is not None and p.is_file()), None)
    if path is None:
        raise ReplayError(f"the task file {recorded} is not here; pass --task PATH")
    task = load_task(path, sandbox_kind=sandbox_kind)
    if task.sha256 != header.task.sha256:
        raise ReplayError(
            f"{path} differs from the recorded task (sha256 {task.sha256[:12]}, recorded {header.task.sha256[:12]})"
        )
    return task


def _config(transcript: Transcript, task: Task, out: Path, *, sandbox: str, arch: str | None) -> SolveConfig:
    """The recorded config (an old header's flat referee keys included), on this machine: its task
    path, output folder, sandbox and arch."""
    recorded = dict(transcript.header.config)
    recorded.update(task=task.path, out=out, model=f"replay:{transcript.path}", sandbox=sandbox)
    config = SolveConfig.model_validate(recorded)
    return config.model_copy(update={"referee": config.referee.model_copy(update={"arch": arch})})


def default_referee(config: SolveConfig) -> Referee:
    return RefereeAdapter(config.referee)


NO_GPU = (
    "no CUDA GPU is visible here (torch.cuda.is_available() is False): replay re-judges the recorded "
    "{what} on a GPU; run it on a machine with one"
)


def _require_gpu(referee: Referee, what: str) -> None:
    """Stop before anything is re-run when there is no GPU to judge on: re-judging without one gives
    `no_gpu` verdicts, which would read as divergences."""
    if referee.device() is None:
        raise ReplayError(NO_GPU.format(what=what))


def _prepare(
    path: Path, out: Path, referee: Referee | None, *, sandbox: str, arch: str | None, task: Path | None
) -> tuple[Transcript, Task, SolveConfig, Referee]:
    """The recording, its task on this machine, the run's config as recorded, and the referee."""
    transcript = load_transcript(path)
    resolved = resolve_task(transcript.header, task, sandbox_kind=sandbox)
    config = _config(transcript, resolved, Path(out), sandbox=sandbox, arch=arch)
    return transcript, resolved, config, referee or default_referee(config)


def replay_run(
    path: Path,
    *,
    out: Path,
    referee: Referee | None = None,
    sandbox: str = "local",
    arch: str | None = None,
    task: Path | None = None,
    stop_at_first_divergence: bool = False,
    sandbox_options: Mapping[str, object] | None = None,
    noise: NoiseRule | None = None,
) -> ReplayReport:
    """Re-run every recorded tool call through the loop; raises SolveError/ReplayError when it cannot start."""
    noise = noise or NoiseRule()
    transcript, resolved, config, referee = _prepare(
        path, out, referee, sandbox=sandbox, arch=arch, task=task
    )
    if not config.allow_no_gpu:  # a recorded compile-only dry run replays without a GPU
        _require_gpu(referee, "verify and profile calls")
    recorded = observations(transcript)
    responses = [event.response for event in transcript.of_type(ModelResponseEvent)]
    live = Path(out) / "transcript.jsonl"
    model = (
        _CheckedReplay(responses, recorded, live, noise)
        if stop_at_first_divergence
        else ReplayModel(responses)
    )
    result = solve(
        config,
        model=model,
        referee=referee,
        task=resolved,
        sandbox_options=sandbox_options,
        recorded_elisions=recorded_elisions(transcript),
    )
    replayed = load_transcript(live)
    steps = compare_runs(recorded, observations(replayed), noise)
    end = transcript.run_end
    return ReplayReport(
        transcript=Path(path),
        out=Path(out),
        mode="full",
        recorded_gpu=transcript.header.gpu,
        replay_gpu=replayed.header.gpu,
        recorded_status=end.status if end else None,
        replay_status=result.status,
        stopped_early=result.status == ReplayDiverged.status,
        noise=noise,
        steps=steps,
        request_difference=first_request_difference(transcript, replayed),
    )


def final_evaluation(transcript: Transcript) -> EvaluationEvent:
    """The recorded verdict of the run's best solution (else its submission, else its last correct one),
    preferring a timed one."""
    end = transcript.run_end
    evaluations: list[EvaluationEvent] = transcript.of_type(EvaluationEvent)
    ref = (end.best or end.submitted) if end else None
    wanted = (
        ref.content_hash
        if ref
        else next((e.content_hash for e in reversed(evaluations) if e.verdict == "correct"), None)
    )
    if wanted is None:
        raise ReplayError(f"{transcript.path}: the run recorded no correct solution to re-judge")
    same = [e for e in evaluations if e.content_hash == wanted]
    timed = [e for e in same if (e.result.get("performance") or {}).get("speedup_vs_eager")]
    return (timed or same)[-1]


def solution_files(transcript: Transcript, content_hash: str) -> dict[str, str]:
    """The model files with `content_hash`: rebuilt from the file edits, else the run's solution/ folder."""
    rebuilt = file_history(transcript).judged.get(content_hash)
    if rebuilt is not None:
        return rebuilt
    folder = transcript.path.parent / "solution"
    if folder.is_dir():
        files = Workspace(folder).model_files()
        if Workspace(folder).content_hash() == content_hash:
            return files
    raise ReplayError(f"cannot rebuild the files of solution {content_hash[:12]} from {transcript.path}")


def rejudge_final(
    path: Path,
    *,
    out: Path,
    referee: Referee | None = None,
    sandbox: str = "local",
    arch: str | None = None,
    task: Path | None = None,
    sandbox_options: Mapping[str, object] | None = None,
    noise: NoiseRule | None = None,
) -> ReplayReport:
    """Re-judge the recorded best solution in a fresh workspace and compare the two verdicts."""
    noise = noise or NoiseRule()
    transcript, resolved, _, referee = _prepare(path, out, referee, sandbox=sandbox, arch=arch, task=task)
    _require_gpu(referee, "final solution")
    recorded = final_evaluation(transcript)
    files = solution_files(transcript, recorded.content_hash)
    Path(out).mkdir(parents=True, exist_ok=True)
    workspace = Workspace.create(Path(out) / "workspace", resolved)
    workspace.restore(Snapshot(content_hash=recorded.content_hash, files=files))
    with open_sandbox(sandbox, workspace=workspace.root, **dict(sandbox_options or {})) as box:
        result = referee.evaluate(resolved, workspace, sandbox=box, profile=True)
    (Path(out) / "result.json").write_text(result.model_dump_json(indent=2))
    before = _final_observation(
        recorded.turn, recorded.verdict, recorded.reason, recorded.content_hash, recorded.result
    )
    after = _final_observation(
        recorded.turn,
        result.verdict,
        result.reason,
        result.solution.content_hash,
        result.model_dump(mode="json"),
    )
    end = transcript.run_end
    return ReplayReport(
        transcript=Path(path),
        out=Path(out),
        mode="final",
        recorded_gpu=transcript.header.gpu,
        replay_gpu=referee.device(),
        recorded_status=end.status if end else None,
        replay_status=result.verdict,
        noise=noise,
        steps=compare_runs([before], [after], noise),
    )


def _final_observation(turn: int, verdict: str, reason: str, content_hash: str, result: dict) -> Observation:
    obs = Observation(
        turn=turn, call_id="final", tool="rejudge", is_error=verdict != "correct", content=reason
    )
    apply_evaluation(obs, verdict, reason, content_hash, result)
    return obs

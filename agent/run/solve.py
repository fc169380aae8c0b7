"""One solve run: set up the workspace, sandbox, prompts and transcript, run the loop, and write the
output folder.

    OUT/
      transcript.jsonl   every model request and response, tool call and result, verdict (as it happens)
      workspace/         the workspace the model worked in, as it was left
      solution/          the best verified solution (workspace files)
      model_new.py       the same solution as one standalone file (torch alone builds and runs it)
      result.json        the referee's verdict of the best (else of the last candidate judged)
      run.json           the run's summary (status, best, submitted, usage)
      report.md          a short human report
      regions/, regions.json   a whole model's regions the model opened (agent/tools/regions.py):
                         their tasks and sub-workspaces, and what each got and returned
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from traceback import format_exc
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from agent.budget import Budget, BudgetLimits
from agent.build.standalone import standalone_model
from agent.messages import SystemMessage, UserMessage
from agent.models.base import DEFAULT_REQUEST_TIMEOUT_S, Model
from agent.models.registry import DEFAULT_MODEL
from agent.referee.options import EvalOptions
from agent.regions.hot import HotRegionTable
from agent.run.brief import NO_GPU, TaskFacts, gather_facts, measure_baselines, render_brief
from agent.run.by_region import RegionwisePolicy, solve_by_region
from agent.run.context import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_KEEP_TURNS,
    ContextLimits,
    ContextWindow,
    Elision,
)
from agent.run.loop import AgentLoop, LoopOutcome, Progress
from agent.run.model_regions import region_run_of
from agent.run.report import render_report
from agent.run.result import SolveResult
from agent.run.setup import run_prompts, tool_context, transcript_header
from agent.tasks import Task, load_task
from agent.templates import trace_task
from agent.tools import RegionDesk, Toolbox, ToolContext, ToolSettings, default_tools
from agent.tools.candidates import Candidate, CandidateBook, Referee, RefereeAdapter
from agent.transcripts.format import RunEndEvent, TranscriptWriter
from agent.transcripts.reader import read_transcript
from agent.workspace import HARNESS_FILES, MODEL_ENTRY, Workspace
from sandbox.base import Sandbox, open_sandbox
from sandbox.safe_files import SkippedEntry, read_text, write_file

log = logging.getLogger(__name__)

NO_GPU_MESSAGE = (
    "no CUDA GPU is visible here (torch.cuda.is_available() is False): verify and profile need one. "
    "Run on a GPU machine, or pass --allow-no-gpu for a compile-only dry run (no verdicts, no speedups)."
)


class SolveError(Exception):
    """The run cannot start; the message says what to change."""


FLAT_REFEREE_KEYS = ("policy", "arch", "trials", "compile_mode", "compile_timeout_s")
"""The referee options SolveConfig held at its top level before `referee` (transcript headers and
run configs written then still load)."""


class SolveConfig(BaseModel):
    task: Path
    out: Path
    model: str = Field(default=DEFAULT_MODEL, description="the --model spec")
    budget: BudgetLimits = BudgetLimits()
    sandbox: str = "local"
    referee: EvalOptions = Field(
        default_factory=EvalOptions,
        description="how every candidate is judged (policy, trials, arch, ...); the compile tool "
        "builds with its arch and compile timeout",
    )
    baseline: Literal["eager", "compile"] = Field(
        default="compile", description="what the best candidate is ranked against (the other is reported)"
    )
    shell: bool = False
    allow_no_gpu: bool = False
    shell_timeout_s: float = 300.0
    max_output_tokens: int | None = None
    max_idle_turns: int = 3
    context_tokens: int = Field(
        default=DEFAULT_CONTEXT_TOKENS,
        ge=0,
        description="estimated input tokens per request before old turns are elided (0: never elide)",
    )
    context_keep_turns: int = Field(default=DEFAULT_KEEP_TURNS, ge=1, description="last turns never folded")
    request_timeout_s: float = Field(
        default=DEFAULT_REQUEST_TIMEOUT_S, gt=0, description="seconds one model request may wait"
    )
    region_allocation: Literal["gain", "uniform"] = Field(
        default="gain",
        description="a region-by-region templates run (agent/run/by_region.py): split the candidates "
        "by expected gain, or the same to every covered region",
    )

    @model_validator(mode="before")
    @classmethod
    def _fold_flat_referee_keys(cls, data: Any) -> Any:
        """An old header's `policy`, `arch`, `trials`, `compile_mode` and `compile_timeout_s` go into
        `referee` (over what it already says)."""
        if not isinstance(data, dict) or not any(key in data for key in FLAT_REFEREE_KEYS):
            return data
        data = dict(data)
        referee = data.get("referee") or {}
        nested = referee.model_dump() if isinstance(referee, EvalOptions) else dict(referee)
        data["referee"] = nested | {key: data.pop(key) for key in FLAT_REFEREE_KEYS if key in data}
        return data


def solve(
    config: SolveConfig,
    *,
    model: Model,
    referee: Referee | None = None,
    task: Task | None = None,
    progress: Progress | None = None,
    sandbox_options: Mapping[str, object] | None = None,
    clock: Callable[[], float] = time.monotonic,
    recorded_elisions: Mapping[int, Elision] | None = None,
    facts: TaskFacts | None = None,
) -> SolveResult:
    """Run the agent on one task and write the output folder. Raises SolveError before any model call
    when the run cannot start; everything after that ends with a recorded status. `recorded_elisions`
    (a replay's, by turn) replace the context window's own choice of what to elide. `facts` (the task
    brief's) are gathered before the first turn when not given (`task_facts`)."""
    out = Path(config.out)
    if out.exists() and not out.is_dir():
        raise SolveError(f"--out {out}: is a file; give a new or empty folder")
    if out.exists() and any(out.iterdir()):
        raise SolveError(f"--out {out}: the folder exists and is not empty; pick a new one")
    referee = referee or RefereeAdapter(config.referee)
    gpu = referee.device()
    if gpu is None and not config.allow_no_gpu:
        raise SolveError(NO_GPU_MESSAGE)
    task = task or load_task(config.task, sandbox_kind=config.sandbox)
    if isinstance(model, RegionwisePolicy):  # each region is a solve() of its own
        return solve_by_region(
            config,
            model,
            solve_one=solve,
            referee=referee,
            task=task,
            progress=progress,
            sandbox_options=sandbox_options,
        )
    out.mkdir(parents=True, exist_ok=True)
    workspace = Workspace.create(out / "workspace", task)
    budget = Budget(config.budget, clock=clock)
    with (
        open_sandbox(config.sandbox, workspace=workspace.root, **dict(sandbox_options or {})) as sandbox,
        ExitStack() as regions_open,
    ):
        facts = facts or task_facts(config, task, referee, sandbox, gpu, budget)
        desk = _region_desk(config, task, out, sandbox_options) if facts.hot is not None else None
        if desk is not None:
            regions_open.callback(desk.close)
        toolbox = Toolbox(default_tools(shell_enabled=config.shell, regions=desk is not None))
        prompts = run_prompts(
            task,
            config.referee,
            baseline=config.baseline,
            gpu=gpu,
            budget_line=budget.remaining_line(),
            brief=render_brief(facts),
        )
        header = transcript_header(
            task,
            model=getattr(model, "name", config.model),
            config=config.model_dump(mode="json"),
            tools=toolbox.specs,
            prompt_hashes=prompts.hashes,
            gpu=gpu,
            sandbox=sandbox.describe(),
        )
        with TranscriptWriter(out / "transcript.jsonl", header, clock=clock) as transcript:
            settings = ToolSettings(
                referee=config.referee,
                shell_timeout_s=config.shell_timeout_s,
                allow_no_gpu=config.allow_no_gpu,
                work=facts.work,
            )
            context = tool_context(
                task,
                workspace,
                sandbox,
                referee=referee,
                budget=budget,
                baseline=config.baseline,
                events=transcript,
                settings=settings,
            )
            context.regions = desk
            loop = AgentLoop(
                model=model,
                toolbox=toolbox,
                context=context,
                transcript=transcript,
                max_output_tokens=config.max_output_tokens,
                progress=progress or (lambda ctx, note: None),
                max_idle_turns=config.max_idle_turns,
                window=ContextWindow(
                    ContextLimits(
                        ceiling_tokens=config.context_tokens, keep_last_turns=config.context_keep_turns
                    ),
                    recorded=recorded_elisions,
                ),
            )
            outcome = loop.run([SystemMessage(text=prompts.system), UserMessage(text=prompts.task)])
            if desk is not None:
                desk.focus_whole(context)  # the run returns the whole model's work, whatever was open
            result = _finish(out, task, context, outcome, transcript)
        if facts.hot is not None:
            write_model_regions(out, facts.hot)
        return result


def write_model_regions(out: Path, hot: HotRegionTable) -> None:
    """regions.json and report.md's regions section, from the closed transcript, when the model
    opened a region."""
    run = region_run_of(read_transcript(out / "transcript.jsonl"), hot)
    if run is None:
        return
    write_file(out, "regions.json", run.model_dump_json(indent=2).encode())
    report = read_text(out, "report.md") or ""
    write_file(out, "report.md", (report.rstrip("\n") + "\n\n" + run.markdown()).encode())


def _region_desk(
    config: SolveConfig, task: Task, out: Path, sandbox_options: Mapping[str, object] | None
) -> RegionDesk:
    """The region tools' state for a whole model: region sub-workspaces under `out/regions`, each
    with a sandbox of the run's kind, their tasks loaded as the run's was."""
    options = dict(sandbox_options or {})
    return RegionDesk(
        folder=out / "regions",
        open_sandbox=lambda root: open_sandbox(config.sandbox, workspace=root, **options),
        load_task=lambda path: load_task(path, sandbox_kind=config.sandbox),
        trace=lambda: trace_task(Path(task.path), sandbox_kind=config.sandbox),
    )


def task_facts(
    config: SolveConfig, task: Task, referee: Referee, sandbox: Sandbox, gpu: str | None, budget: Budget
) -> TaskFacts:
    """The task brief's facts: the traced work (for an inspected task), and the baselines timed once on
    this GPU by the real referee (cached per task and GPU; the time is charged to the GPU budget), or
    why there are none."""
    times, note = None, NO_GPU
    if gpu is not None and isinstance(referee, RefereeAdapter):
        started = time.monotonic()
        times = measure_baselines(task, config.referee, sandbox, gpu=gpu)
        budget.charge_gpu(time.monotonic() - started)
    elif gpu is not None:
        note = "not measured before the first turn (this referee times them with the first profile)"
    return gather_facts(
        task,
        options=config.referee,
        gpu=gpu,
        baseline=config.baseline,
        sandbox_kind=config.sandbox,
        trace=task.spec is not None,
        baselines=times,
        baselines_note=note,
    )


def _finish(
    out: Path, task: Task, context: ToolContext, outcome: LoopOutcome, transcript: TranscriptWriter
) -> SolveResult:
    """Write the output folder, then the run_end event (also when writing the folder fails)."""
    try:
        result = write_outputs(
            out,
            task,
            context.workspace,
            context.candidates,
            context.budget,
            outcome,
            unsandboxed=context.sandbox.isolation().unsandboxed,
        )
    except Exception as exc:
        message = f"writing the output folder failed: {type(exc).__name__}: {exc}"
        usage = context.budget.usage()
        transcript.write(
            RunEndEvent(
                turn=context.turn, status="error", message=message, usage=usage, traceback=format_exc()
            )
        )
        raise
    end = RunEndEvent(
        turn=context.turn,
        status=result.status,
        message=result.message,
        best=result.best,
        submitted=result.submitted,
        usage=result.usage,
        traceback=outcome.traceback,
    )
    transcript.write(end)
    return result


def write_outputs(
    out: Path,
    task: Task,
    workspace: Workspace,
    book: CandidateBook,
    budget: Budget,
    outcome: LoopOutcome,
    *,
    unsandboxed: bool = False,
) -> SolveResult:
    """Write solution/, model_new.py, result.json, run.json and report.md; return the run's summary."""
    chosen: Candidate | None = book.best
    if chosen is None and outcome.status == "submitted_unverified":
        chosen = book.submitted
    if chosen is not None:
        solution = out / "solution"
        for entry in export_solution(workspace, chosen, solution):
            log.warning("solution export: %s", entry.line())
        harness = {name: read_text(solution, name) or "" for name in HARNESS_FILES}
        if MODEL_ENTRY in chosen.snapshot.files:
            standalone = standalone_model(chosen.snapshot, harness, task=task.name)
            write_file(out, "model_new.py", standalone.encode())
    judged = chosen or book.latest
    if judged is not None:
        write_file(out, "result.json", judged.result.model_dump_json(indent=2).encode())
    submitted = book.submitted
    result = SolveResult(
        status=outcome.status,
        message=outcome.message,
        task=task.name,
        out=out,
        baseline=book.baseline,
        best=book.best.ref() if book.best else None,
        submitted=submitted.ref() if submitted else None,
        submitted_is_best=(
            None
            if submitted is None or book.best is None
            else submitted.content_hash == book.best.content_hash
        ),
        verified=chosen is not None and chosen.correct,
        evaluation=judged.result if judged is not None else None,
        summary=outcome.summary,
        usage=budget.usage(),
        limits=budget.limits,
        traceback=outcome.traceback,
        unsandboxed=unsandboxed,
    )
    write_file(out, "report.md", render_report(result, book, task).encode())
    files = {p.name for p in out.iterdir()} | {"run.json"}
    result = result.model_copy(update={"files": sorted(files)})
    write_file(out, "run.json", result.model_dump_json(indent=2).encode())
    return result


def export_solution(workspace: Workspace, candidate: Candidate, dest: Path) -> list[SkippedEntry]:
    """The workspace as it was when `candidate` was judged: its regular files (links, FIFOs and
    devices are left out and returned), harness files restored, and the snapshot's files."""
    skipped: list[SkippedEntry] = []
    copy = workspace.copy_to(dest, exclude=(".harness/logs",), skipped=skipped)
    copy.restore_harness_files()
    copy.restore(candidate.snapshot)
    return skipped

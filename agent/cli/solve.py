"""`agent solve TASK.py`: the main job. Registered by agent/cli/app.py as `app.command("solve")(solve_command)`.

Everything that can be refused is refused before any token is spent, in this order: a bad flag, a
missing API key, no GPU (unless --allow-no-gpu), an unusable task or output folder.
"""

from __future__ import annotations

import datetime
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from agent.budget import BUDGET_FLAG_HELP, BudgetLimits, BudgetSpecError

if TYPE_CHECKING:
    from agent.models.base import Model
    from agent.tools.candidates import Referee

err_console = Console(stderr=True, soft_wrap=True)  # paths in messages stay whole
console = Console()

DEFAULT_MODEL = "anthropic:claude-sonnet-5-5"
POLICIES = ("strict", "kernelbench")
BASELINES = ("eager", "compile")


def _fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def make_referee(*, policy: str, arch: str | None, compile_mode: str) -> Referee:
    """The referee a CLI run uses (tests replace this function to inject their own)."""
    from agent.tools.candidates import RefereeAdapter

    return RefereeAdapter(policy=policy, arch=arch, compile_mode=compile_mode)


def _load_model(spec: str, prices: Path | None) -> Model:
    if spec.startswith("replay:"):
        from agent.models.replay import ReplayModel
        from agent.transcripts.format import TranscriptError

        try:
            return ReplayModel.from_transcript(Path(spec.removeprefix("replay:")))
        except TranscriptError as exc:
            _fail(f"--model {spec}: {exc}")
    from agent.models import ModelError, load_prices, resolve_model

    try:
        return resolve_model(spec, prices=load_prices(prices) if prices else None)
    except (ModelError, ValueError, OSError) as exc:
        _fail(f"--model {spec}: {exc}")


def _check_credentials(spec: str) -> None:
    if spec.startswith("replay:"):
        if not Path(spec.removeprefix("replay:")).is_file():
            _fail(f"--model {spec}: no such transcript file")
        return
    from agent.models import ModelSpecError, check_credentials

    try:
        missing = check_credentials(spec)
    except ModelSpecError as exc:
        _fail(str(exc))
    if missing:
        _fail(f"--model {spec} needs an API key: {missing}")


def solve_command(
    task: Annotated[
        Path, typer.Argument(help="A KernelBench-style task file (Model, get_inputs, get_init_inputs).")
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="anthropic:NAME, openai:NAME, openai:NAME@http://HOST:PORT/v1 (any OpenAI-compatible server), "
            "or replay:TRANSCRIPT.jsonl (play back a recorded run's model turns).",
        ),
    ] = DEFAULT_MODEL,
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget", help=f"Limits: {BUDGET_FLAG_HELP}. Defaults: turns=40,usd=10,wall=1h,gpu=15m."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (new or empty); default runs/TASK-TIME.")
    ] = None,
    sandbox: Annotated[
        str, typer.Option("--sandbox", help="Where untrusted code runs: local, docker or auto.")
    ] = "local",
    policy: Annotated[
        str, typer.Option("--policy", help="Referee policy: strict (no torch compute) or kernelbench.")
    ] = "strict",
    arch: Annotated[
        str | None,
        typer.Option("--arch", help="GPU architecture to build for (sm_90, 9.0); default: the visible GPU."),
    ] = None,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", min=1, help="Shortcut for --budget turns=N.")
    ] = None,
    baseline: Annotated[
        str, typer.Option("--baseline", help="What the best solution is ranked against: eager or compile.")
    ] = "eager",
    shell: Annotated[
        bool, typer.Option("--shell", help="Give the model a shell inside the sandbox.")
    ] = False,
    allow_no_gpu: Annotated[
        bool,
        typer.Option(
            "--allow-no-gpu", help="Compile-only dry run without a GPU: nothing is verified or timed."
        ),
    ] = False,
    prices: Annotated[
        Path | None, typer.Option("--prices", help="A TOML price table over the bundled one.")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Log lines instead of the live status line.")
    ] = False,
) -> None:
    """Make one PyTorch module faster: an LLM writes CUDA kernels, the referee judges them, and the best
    verified solution, a report and the transcript land in the output folder."""
    try:
        limits = BudgetLimits().with_spec(budget)
    except BudgetSpecError as exc:
        _fail(str(exc))
    if max_turns is not None:
        limits = limits.model_copy(update={"turns": max_turns})
    if policy not in POLICIES:
        _fail(f"--policy {policy!r}: choose one of {', '.join(POLICIES)}")
    if baseline not in BASELINES:
        _fail(f"--baseline {baseline!r}: choose one of {', '.join(BASELINES)}")
    _check_credentials(model)

    from agent.build.toolkit import ToolkitError
    from agent.run.solve import NO_GPU_MESSAGE, SolveConfig, SolveError, solve
    from agent.tasks import TaskLoadError
    from sandbox.base import SandboxError

    referee = make_referee(policy=policy, arch=arch, compile_mode="default")
    if not allow_no_gpu and referee.device() is None:
        _fail(NO_GPU_MESSAGE)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    config = SolveConfig(
        task=task,
        out=out or Path("runs") / f"{task.stem}-{stamp}",
        model=model,
        budget=limits,
        sandbox=sandbox,
        policy=policy,
        arch=arch,
        baseline="compile" if baseline == "compile" else "eager",
        shell=shell,
        allow_no_gpu=allow_no_gpu,
    )
    agent_model = _load_model(model, prices)
    from agent.run.progress import LiveStatus, LogProgress
    from agent.run.report import best_line

    if quiet or not err_console.is_terminal:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
        display = None
    else:
        display = LiveStatus(err_console)
    try:
        if display is None:
            result = solve(config, model=agent_model, referee=referee, progress=LogProgress())
        else:
            with display:
                result = solve(config, model=agent_model, referee=referee, progress=display)
    except (SolveError, TaskLoadError, SandboxError, ToolkitError) as exc:
        _fail(str(exc))
    color = "green" if result.verified else "yellow"
    console.print(f"[{color}]{result.status}[/]: {result.message}", highlight=False)
    best = best_line(result)
    if best:
        console.print(best, highlight=False)
    console.print(
        f"output: {config.out} (report.md, solution/, model_new.py, transcript.jsonl)", highlight=False
    )
    if not (result.verified or result.status == "submitted_unverified"):
        raise typer.Exit(1)

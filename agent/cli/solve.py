"""`agent solve TASK.py`: the main job. Registered by agent/cli/app.py as `app.command("solve")(solve_command)`.

Everything that can be refused is refused before the GPU probe, any model call, build or write, in
this order (the first failing check wins, one line, exit 2): a bad flag (--budget, --policy,
--baseline, --sandbox, --arch), the --model spec, the --prices file, the task file, the --out
folder, a missing API key; then no GPU (unless --allow-no-gpu); then, for the template policy, a
task its library does not cover (the task is traced first, in the sandbox).

Without --model, the model is DEFAULT_MODEL when its API key is set, else the built-in template
policy (--model templates), which says so in one line on stderr once it covers the task; a task it
does not cover is refused with both reasons (not covered, and the key an LLM needs). An explicit
--model whose key is missing is refused as before.
"""

from __future__ import annotations

import datetime
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from agent.budget import BudgetLimits, BudgetSpecError, parse_budget_spec
from agent.cli.common import (
    CONTEXT_TOKENS_HELP,
    DEFAULT_INSPECT_TIMEOUT_S,
    BudgetOpt,
    InspectTimeoutOpt,
    PolicyOpt,
    PrecisionOpt,
    SandboxOpt,
    UnsandboxedFlag,
    arch_option,
    check_confinement,
    check_output_folder,
    check_seconds,
    checked_options,
    console,
    context_options,
    err_console,
    fail,
    json_flag,
    request_timeout_option,
)
from agent.models.base import DEFAULT_REQUEST_TIMEOUT_S
from agent.models.registry import DEFAULT_MODEL, REQUEST_TIMEOUT_HELP, TEMPLATES_MODEL

if TYPE_CHECKING:
    from agent.models.base import Model
    from agent.referee.options import EvalOptions
    from agent.tools.candidates import Referee

POLICIES = ("strict", "kernelbench")
BASELINES = ("eager", "compile")
REGION_ALLOCATIONS = ("gain", "uniform")


def make_referee(*, options: EvalOptions) -> Referee:
    """The referee a CLI run uses (tests replace this function to inject their own)."""
    from agent.tools.candidates import RefereeAdapter

    return RefereeAdapter(options)


"""The built-in policy (agent/templates/): the template library with its slot agents, no API key."""


def _load_model(
    spec: str,
    prices: Path | None,
    task: Path,
    *,
    no_key: str | None = None,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
) -> Model:
    """`no_key`: what the default model's key check said when no --model was given (the run then uses
    the template policy, and says so)."""
    if spec == TEMPLATES_MODEL:
        from agent.run.by_region import RegionwisePolicy, templates_model
        from agent.templates import NotCovered

        policy = templates_model(task)  # a model covered only region by region is solved that way
        if isinstance(policy, NotCovered):
            if no_key is not None:
                fail(
                    f"no --model and no {_default_key_env()}, so the built-in template policy was tried, "
                    f"and its library does not cover {task}: {policy.reason}; an LLM needs the key: {no_key}"
                )
            fail(f"--model templates: the template library does not cover {task}: {policy.reason}")
        if isinstance(policy, RegionwisePolicy):
            err_console.print(
                escape(f"{task}: {policy.reason}; solving it region by region"), highlight=False
            )
        if no_key is not None:
            err_console.print(
                escape(
                    f"no {_default_key_env()}: using the built-in template policy (--model templates); "
                    "set the key or pass --model to use an LLM"
                ),
                highlight=False,
            )
        return policy
    if spec.startswith("replay:"):
        from agent.models.replay import ReplayModel
        from agent.transcripts.format import TranscriptError

        try:
            return ReplayModel.from_transcript(Path(spec.removeprefix("replay:")))
        except TranscriptError as exc:
            fail(f"--model {spec}: {exc}")
    from agent.models import ModelError, load_prices, resolve_model

    try:
        return resolve_model(
            spec, prices=load_prices(prices) if prices else None, timeout_s=request_timeout_s
        )
    except (ModelError, ValueError, OSError) as exc:
        fail(f"--model {spec}: {exc}")


def _check_credentials(spec: str) -> None:
    """The API key a provider spec needs (the spec itself is checked by `_check_model_spec` first)."""
    if spec == TEMPLATES_MODEL or spec.startswith("replay:"):
        return
    from agent.models import check_credentials

    missing = check_credentials(spec)
    if missing:
        fail(f"--model {spec} needs an API key: {missing}")


def _pick_model(model: str | None) -> tuple[str, str | None]:
    """The spec to run, and what is missing for DEFAULT_MODEL when no --model was given and its key is
    not set (the spec is then the template policy's). An explicit --model must have its key."""
    if model is not None:
        _check_credentials(model)
        return model, None
    from agent.models import check_credentials

    missing = check_credentials(DEFAULT_MODEL)
    return (DEFAULT_MODEL, None) if missing is None else (TEMPLATES_MODEL, missing)


def _default_key_env() -> str:
    """The environment variable DEFAULT_MODEL's provider reads its key from."""
    from agent.models import parse_model_spec
    from agent.models.base import PROVIDER_KEY_ENV

    return PROVIDER_KEY_ENV[parse_model_spec(DEFAULT_MODEL).provider]


def _check_model_spec(spec: str) -> None:
    if spec == TEMPLATES_MODEL:
        return
    if spec.startswith("replay:"):
        if not Path(spec.removeprefix("replay:")).is_file():
            fail(f"--model {spec}: no such transcript file")
        return
    from agent.models import ModelSpecError, parse_model_spec

    try:
        parse_model_spec(spec)
    except ModelSpecError as exc:
        fail(str(exc))


def _check_prices(prices: Path | None) -> None:
    if prices is None:
        return
    from agent.models.prices import PricesFileError, load_prices

    try:
        load_prices(prices)
    except PricesFileError as exc:
        fail(f"--prices: {exc}")


def _check_task(task: Path) -> None:
    """The task file exists and parses (nothing of it runs yet)."""
    from agent.tasks import TaskLoadError, parse_task

    try:
        parse_task(task)
    except TaskLoadError as exc:
        fail(str(exc))


def _check_out(out: Path) -> None:
    if out.is_file() or (out.exists() and not out.is_dir()):
        fail(f"--out {out}: is a file; give a new or empty folder")
    if out.is_dir() and any(out.iterdir()):
        fail(f"--out {out}: the folder exists and is not empty; pick a new one")
    check_output_folder("--out", out)


def _check_sandbox(sandbox: str) -> None:
    from sandbox.base import sandbox_kinds

    if sandbox == "auto":
        return
    kinds = sandbox_kinds()
    if sandbox not in kinds:
        fail(f"--sandbox {sandbox!r}: unknown sandbox; choose one of {', '.join([*kinds, 'auto'])}")


def _check_arch(arch: str | None) -> None:
    if arch is None:
        return
    from agent.build.toolkit import ToolkitError, check_arch

    try:
        check_arch(arch)
    except ToolkitError as exc:
        fail(str(exc))


OUTPUT_FILES = ("report.md", "solution", "model_new.py", "transcript.jsonl")
"""What the closing line points a user to, in this order, when the run wrote it."""


def output_line(out: Path) -> str:
    """`output: DIR (report.md, solution/, ...)`, naming only what is there."""
    written = [
        name + ("/" if (out / name).is_dir() else "") for name in OUTPUT_FILES if (out / name).exists()
    ]
    return f"output: {out} ({', '.join(written)})" if written else f"output: {out}"


def solve_command(
    task: Annotated[
        Path, typer.Argument(help="A KernelBench-style task file (Model, get_inputs, get_init_inputs).")
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="anthropic:NAME, openai:NAME, openai:NAME@http://HOST:PORT/v1 (any OpenAI-compatible server), "
            "replay:TRANSCRIPT.jsonl (play back a recorded run's model turns), "
            f"or templates (the built-in template library, no API key). Default: {DEFAULT_MODEL}, "
            "or templates when its API key is not set.",
        ),
    ] = None,
    budget: BudgetOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (new or empty); default runs/TASK-TIME.")
    ] = None,
    sandbox: SandboxOpt = "local",
    policy: PolicyOpt = "strict",
    precision: PrecisionOpt = "fp32",
    arch: Annotated[
        str | None, arch_option("GPU architecture to build for (sm_90, 9.0); default: the visible GPU.")
    ] = None,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", help="Shortcut for --budget turns=N.")
    ] = None,
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline", help="What the best solution is ranked against: compile (torch.compile) or eager."
        ),
    ] = "compile",
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
    request_timeout: Annotated[
        str | None, typer.Option("--request-timeout", help=REQUEST_TIMEOUT_HELP)
    ] = None,
    context_tokens: Annotated[str | None, typer.Option("--context-tokens", help=CONTEXT_TOKENS_HELP)] = None,
    inspect_timeout: InspectTimeoutOpt = DEFAULT_INSPECT_TIMEOUT_S,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Log lines instead of the live status line.")
    ] = False,
    as_json: Annotated[
        bool, json_flag("Print the SolveResult as JSON (no status line, no log lines).")
    ] = False,
    unsandboxed: UnsandboxedFlag = False,
    region_allocation: Annotated[
        str,
        typer.Option(
            "--region-allocation",
            help="--model templates on a model covered region by region: split the candidates by "
            "expected gain (gain) or the same to every covered region (uniform).",
        ),
    ] = "gain",
) -> None:
    """Make one PyTorch module faster: an LLM writes CUDA kernels, the referee judges them, and the best
    verified solution, a report and the transcript land in the output folder."""
    try:
        limits = BudgetLimits().with_spec(budget)
    except BudgetSpecError as exc:
        fail(str(exc))
    if max_turns is not None:
        if max_turns < 1:
            fail(f"--max-turns {max_turns}: give at least 1 model call")
        if budget is not None and limits.turns != max_turns and "turns" in parse_budget_spec(budget):
            fail(
                f"--max-turns {max_turns} and --budget turns={limits.turns} disagree; give the turn limit once"
            )
        limits = limits.model_copy(update={"turns": max_turns})
    check_seconds("--inspect-timeout", inspect_timeout)
    request_timeout_s = request_timeout_option(request_timeout)
    context = context_options(context_tokens)
    if policy not in POLICIES:
        fail(f"--policy {policy!r}: choose one of {', '.join(POLICIES)}")
    if baseline not in BASELINES:
        fail(f"--baseline {baseline!r}: choose one of {', '.join(BASELINES)}")
    if region_allocation not in REGION_ALLOCATIONS:
        fail(f"--region-allocation {region_allocation!r}: choose one of {', '.join(REGION_ALLOCATIONS)}")
    _check_sandbox(sandbox)
    check_confinement(sandbox, unsandboxed)
    _check_arch(arch)
    if model is not None:
        _check_model_spec(model)
    _check_prices(prices)
    _check_task(task)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = out or Path("runs") / f"{task.stem}-{stamp}"
    _check_out(out)
    spec, no_key = _pick_model(model)

    from agent.build.toolkit import ToolkitError
    from agent.referee.options import EvalOptions
    from agent.run.solve import NO_GPU_MESSAGE, SolveConfig, SolveError, solve
    from agent.tasks import TaskLoadError, load_task
    from sandbox.base import SandboxError

    options = checked_options(EvalOptions, policy=policy, precision=precision, arch=arch)
    referee = make_referee(options=options)
    if not allow_no_gpu and referee.device() is None:
        fail(NO_GPU_MESSAGE)
    try:
        loaded = load_task(task, timeout=inspect_timeout, sandbox_kind=sandbox)
    except (TaskLoadError, SandboxError) as exc:
        fail(str(exc))
    config = SolveConfig(
        task=task,
        out=out,
        model=spec,
        budget=limits,
        sandbox=sandbox,
        referee=options,
        baseline="compile" if baseline == "compile" else "eager",
        shell=shell,
        allow_no_gpu=allow_no_gpu,
        request_timeout_s=request_timeout_s,
        region_allocation="uniform" if region_allocation == "uniform" else "gain",
        **context,
    )
    agent_model = _load_model(spec, prices, task, no_key=no_key, request_timeout_s=request_timeout_s)
    from agent.run.progress import LiveStatus, LogProgress
    from agent.run.report import best_line
    from agent.run.signals import interrupt_on_signals

    for name in ("httpx", "httpcore", "httpx2"):  # no `HTTP Request: POST ...` line per model call
        logging.getLogger(name).setLevel(logging.WARNING)
    if as_json:
        display = None
    elif quiet or not err_console.is_terminal:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
        display = None
    else:
        display = LiveStatus(err_console)
    new_root = next((p for p in reversed([out, *out.parents]) if not p.exists()), None)
    try:
        with interrupt_on_signals():
            if display is None:
                result = solve(
                    config, model=agent_model, referee=referee, task=loaded, progress=LogProgress()
                )
            else:
                with display:
                    result = solve(config, model=agent_model, referee=referee, task=loaded, progress=display)
    except (SolveError, TaskLoadError, SandboxError, ToolkitError) as exc:
        if new_root is not None and not (out / "transcript.jsonl").exists():
            shutil.rmtree(new_root, ignore_errors=True)  # a refused run leaves no folder behind
        fail(str(exc))
    if as_json:
        print(result.model_dump_json(indent=2))
        if not (result.verified or result.status == "submitted_unverified"):
            raise typer.Exit(1)
        return
    color = "green" if result.verified else "yellow"
    console.print(f"[{color}]{result.status}[/]: {result.message}", highlight=False)
    best = best_line(result)
    if best:
        console.print(best, highlight=False)
    console.print(output_line(config.out), highlight=False)
    if not (result.verified or result.status == "submitted_unverified"):
        raise typer.Exit(1)

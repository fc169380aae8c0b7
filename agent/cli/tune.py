"""`agent tune TASK SOLUTION --budget 120s`: search a workspace's declared tuning space.

The lead registers it: `app.command("tune")(tune_command)` in agent/cli/app.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from agent.cli.common import (
    JsonFlag,
    SandboxOpt,
    UnsandboxedFlag,
    arch_option,
    budget_option,
    check_confinement,
    err_console,
    fail,
    gpu_visible,
)


def tune_command(
    task: Annotated[Path, typer.Argument(help="The task file (class Model, get_inputs, get_init_inputs).")],
    solution: Annotated[Path, typer.Argument(help="A workspace folder with kernels/tune.json.")],
    budget: Annotated[str, budget_option("Wall-clock budget, compile included: 120s, 2m, 90.")] = "120s",
    evals: Annotated[
        int | None, typer.Option("--evals", help="Also stop after this many measured points.")
    ] = None,
    gpu_seconds: Annotated[
        float | None, typer.Option("--gpu-seconds", help="Also stop after this many GPU-seconds.")
    ] = None,
    no_experience: Annotated[
        bool, typer.Option("--no-experience", help="Start cold: no warm start from similar past runs.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the search (same seed, same choices).")] = 0,
    min_gain: Annotated[
        float,
        typer.Option(
            "--min-gain",
            help="Stop early once the expected gain of the next point is below this (0.005 = 0.5%).",
        ),
    ] = 0.0,
    strategy: Annotated[
        str, typer.Option("--strategy", help="adaptive (default), random, or exhaustive (every valid point).")
    ] = "adaptive",
    apply: Annotated[
        bool, typer.Option("--apply/--no-apply", help="Write the winner back into the workspace.")
    ] = True,
    db: Annotated[
        Path | None, typer.Option("--db", help="Experience library (SQLite); default under the cache.")
    ] = None,
    cache_out: Annotated[
        Path | None,
        typer.Option("--cache-out", help="Write every measured point as a Kernel Tuner cache JSON."),
    ] = None,
    sandbox: SandboxOpt = "local",
    arch: Annotated[str | None, arch_option("GPU architecture to build for.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print every measured point.")] = False,
    as_json: JsonFlag = False,
    unsandboxed: UnsandboxedFlag = False,
) -> None:
    """Tune the parameters a workspace declares in kernels/tune.json within a budget."""
    from agent.budget import parse_duration
    from agent.tasks import TaskLoadError, parse_task
    from agent.workspace import Workspace, WorkspaceError

    if strategy not in ("adaptive", "random", "exhaustive"):
        fail(f"--strategy {strategy!r}: unknown strategy; choose adaptive, random or exhaustive")
    try:
        seconds = parse_duration(budget)
    except ValueError as exc:
        fail(f"--budget {budget!r}: {exc}")
    try:
        parse_task(task)
        workspace = Workspace.open(solution)
    except (TaskLoadError, WorkspaceError) as exc:
        fail(str(exc))
    check_confinement(sandbox, unsandboxed)
    if not gpu_visible():
        fail(
            "no CUDA GPU is visible here (CUDA_VISIBLE_DEVICES hides them, or nvidia-smi lists none): "
            "tuning measures every point on a GPU; run it on a GPU machine"
        )
    from agent.tasks import load_task
    from agent.tune.limits import BudgetSpec
    from agent.tune.render import render
    from agent.tune.runner import TuneOptions, run_tuning
    from sandbox.base import SandboxError, open_sandbox

    try:
        loaded = load_task(task, sandbox_kind=sandbox)
        options = TuneOptions(
            budget=BudgetSpec(wall_seconds=seconds, max_evals=evals, gpu_seconds=gpu_seconds),
            seed=seed,
            min_gain=min_gain,
            strategy=strategy,  # type: ignore[arg-type]
            use_experience=not no_experience,
            experience_path=db,
            apply=apply,
            arch=arch,
            cache_out=cache_out,
        )
        log = (lambda line: err_console.print(line, highlight=False)) if verbose else None
        with open_sandbox(sandbox, workspace=workspace.root) as box:
            result = run_tuning(loaded, workspace, box, options, sandbox_kind=box.kind, log=log)
    except (ValueError, TaskLoadError, WorkspaceError, SandboxError) as exc:
        fail(str(exc))
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        print(render(result))
    if not result.ok:
        raise typer.Exit(1)


if __name__ == "__main__":
    app = typer.Typer(add_completion=False)
    app.command()(tune_command)
    sys.exit(app())

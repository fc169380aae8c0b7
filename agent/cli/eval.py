"""`agent eval TASK SOLUTION`: compile, verify and profile a solution; print the verdict.

Register on the main app with `app.command("eval")(eval_command)`; `eval_app` runs it alone.
Exit status: 0 correct, 1 any other verdict, 2 a usage or setup error, 3 no GPU visible (the
compile stage still ran).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU = 1, 2, 3

console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # paths in messages stay whole


def eval_command(
    task: Annotated[Path, typer.Argument(help="The task file (KernelBench format).")],
    solution: Annotated[
        Path, typer.Argument(help="A workspace folder or a single-file KernelBench solution.")
    ],
    policy: Annotated[
        str, typer.Option("--policy", help="strict (CUDA-Agent rules) or kernelbench (torch glue allowed).")
    ] = "strict",
    trials: Annotated[
        int, typer.Option("--trials", min=1, help="Correctness trials, fresh secret seeds each.")
    ] = 5,
    profile: Annotated[
        bool, typer.Option("--profile/--no-profile", help="Time and profile after verifying.")
    ] = True,
    compile_mode: Annotated[
        str, typer.Option("--compile-mode", help="torch.compile mode of the baseline; 'none' skips it.")
    ] = "default",
    arch: Annotated[
        str | None, typer.Option("--arch", help="GPU architecture to build for (sm_90, 9.0, ...).")
    ] = None,
    sandbox: Annotated[
        str, typer.Option("--sandbox", help="Where the candidate runs: local, docker or auto.")
    ] = "local",
    tolerance: Annotated[
        str, typer.Option("--tolerance", help="default (atol=rtol=1e-2) or tight.")
    ] = "default",
    refresh_baselines: Annotated[
        bool,
        typer.Option(
            "--refresh-baselines", help="Re-time eager and torch.compile instead of using the cache."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the EvalResult as JSON.")] = False,
) -> None:
    """Judge a solution: compile, verify on fresh secret inputs, time against eager and torch.compile."""
    from agent.build.toolkit import ToolkitError
    from agent.referee import evaluate
    from agent.referee.report import verdict_table
    from agent.tasks import TaskLoadError
    from agent.workspace import WorkspaceError
    from sandbox.base import SandboxError

    try:
        result = evaluate(
            task,
            solution,
            sandbox=sandbox,
            policy=policy,
            tolerance=tolerance,
            trials=trials,
            profile=profile,
            compile_mode=compile_mode,
            arch=arch,
            refresh_baselines=refresh_baselines,
        )
    except (TaskLoadError, WorkspaceError, SandboxError, ToolkitError, ValueError) as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(EXIT_USAGE) from None
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        console.print(verdict_table(result))
        if result.verdict == "no_gpu":
            err_console.print(
                "[yellow]no GPU:[/] the solution compiled, but verifying and timing it need a CUDA GPU; "
                "run this on a GPU machine",
                highlight=False,
            )
        elif not result.passed:
            console.print(result.feedback(), highlight=False, markup=False)
    if result.verdict == "no_gpu":
        raise typer.Exit(EXIT_NO_GPU)
    if not result.passed:
        raise typer.Exit(EXIT_FAILED)


eval_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
eval_app.command("eval")(eval_command)

"""The `agent` command line: rich output for people, `--json` for programs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Make PyTorch modules faster with CUDA C++ extensions written by an LLM agent, judged by a trusted referee.",
)
console = Console()
err_console = Console(stderr=True, soft_wrap=True)  # paths in messages stay whole

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the pydantic result as JSON.")]
SandboxOpt = Annotated[
    str, typer.Option("--sandbox", help="Where untrusted code runs: local, docker or auto.")
]
ArchOpt = Annotated[
    str | None,
    typer.Option("--arch", help="GPU architecture to build for (sm_90, 9.0, ...); default: the visible GPU."),
]


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


@app.command()
def tasks(
    folder: Annotated[
        Path, typer.Argument(help="A task file or a folder of them (e.g. KernelBench/level1).")
    ],
    as_json: JsonFlag = False,
    instantiate: Annotated[bool, typer.Option(help="Run each task once to learn its input spec.")] = True,
) -> None:
    """List tasks with their level, hash and input spec."""
    from agent.tasks import TaskLoadError, load_folder

    try:
        found, errors = load_folder(folder, instantiate=instantiate)
    except TaskLoadError as exc:
        fail(str(exc))
    if as_json:
        import json

        print(
            json.dumps(
                {
                    "tasks": [t.model_dump(mode="json") for t in found],
                    "errors": [{"path": str(e.path), "problem": e.problem} for e in errors],
                },
                indent=2,
            )
        )
    else:
        table = Table(title=f"{len(found)} tasks in {folder}")
        for column in ("level", "id", "name", "inputs", "params", "hash"):
            table.add_column(column, overflow="fold")
        for t in found:
            table.add_row(
                str(t.level if t.level is not None else "-"),
                str(t.problem_id if t.problem_id is not None else "-"),
                t.name,
                t.spec.describe() if t.spec else "(not instantiated)",
                f"{t.spec.parameters:,}" if t.spec else "",
                t.sha256[:12],
            )
        if found:
            console.print(table)
        for e in errors:
            err_console.print(f"[red]✗[/] {e}", highlight=False)
    if errors:
        raise typer.Exit(1)


@app.command()
def compile(
    solution: Annotated[
        Path, typer.Argument(help="A workspace folder or a single-file KernelBench solution.")
    ],
    arch: ArchOpt = None,
    sandbox: SandboxOpt = "local",
    timeout: Annotated[float, typer.Option(help="Seconds before the build is killed.")] = 600,
    as_json: JsonFlag = False,
) -> None:
    """Build a solution's CUDA extension and report success with timings or the first real errors."""
    from agent.build.compile import compile_solution
    from agent.build.toolkit import ToolkitError
    from agent.workspace import WorkspaceError, open_solution
    from sandbox.base import SandboxError, open_sandbox

    try:
        target = open_solution(solution)
        with open_sandbox(sandbox, workspace=target.root) as box:
            result = compile_solution(target, box, arch=arch, timeout=timeout)
    except (WorkspaceError, SandboxError, ToolkitError) as exc:
        fail(str(exc))
    if as_json:
        print(result.model_dump_json(indent=2))
    elif result.ok:
        console.print(f"[green]✓[/] {result.feedback()}  [dim]({result.mode}; {result.build_dir})[/]")
        if result.arch_source.startswith("no GPU"):
            console.print(f"[dim]{result.arch_source}[/]")
    else:
        console.print(f"[red]✗[/] {result.feedback()}", highlight=False)
    if not result.ok:
        raise typer.Exit(1)


def _register_subcommands() -> None:
    # Each command lives in its own module; importing them here keeps `agent --help` complete.
    from agent.cli.batch import batch_command, report_command
    from agent.cli.eval import eval_command
    from agent.cli.sandbox import sandbox_app
    from agent.cli.solve import solve_command
    from agent.cli.tune import tune_command

    app.command("solve")(solve_command)
    app.command("eval")(eval_command)
    app.command("batch")(batch_command)
    app.command("report")(report_command)
    app.command("tune")(tune_command)
    app.add_typer(sandbox_app, name="sandbox")
    try:
        from agent.cli.transcripts import export_command, replay_command, show_command
    except ImportError:  # transcripts tooling lands separately
        return
    app.command("replay")(replay_command)
    app.command("show")(show_command)
    app.command("export")(export_command)


_register_subcommands()


def main() -> None:
    app(prog_name="agent")


if __name__ == "__main__":
    sys.exit(main())

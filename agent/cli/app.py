"""The `agent` command line: rich output for people, `--json` for programs.

This module only builds the Typer app and registers each group's commands; they live in
agent/cli/eval.py (judge and inspect: tasks, compile, eval), solve.py, batch.py (batch, report),
tune.py, sandbox.py and transcripts.py (replay, show, export), and share agent/cli/common.py.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from agent.cli.batch import batch_command, report_command
from agent.cli.eval import compile_command, eval_command, tasks_command
from agent.cli.export_tasks import export_tasks_command
from agent.cli.profile import profile_command
from agent.cli.sandbox import sandbox_app
from agent.cli.solve import solve_command
from agent.cli.transcripts import export_command, replay_command, show_command
from agent.cli.tune import tune_command


def _keep_option_names_whole() -> None:
    """Typer's help panels are rich tables whose columns all shrink to fit the terminal, so at 80
    columns a long option name was cut (`--refresh-baselin…`). Now only the type and help columns
    shrink, and they wrap; option names are never cut."""
    import typer.rich_utils
    from rich.columns import Columns
    from rich.table import Table
    from rich.text import Text

    class HelpTable(Table):
        def add_row(self, *renderables: Any, **kwargs: Any) -> None:
            super().add_row(*renderables, **kwargs)
            for column in self.columns[:-2]:  # the names; the type (it folds) and help may wrap
                column.no_wrap = True
            # A long word in a help text (a path, a default) wraps instead of ending in "…".
            help_text = renderables[-1] if renderables else None
            parts = help_text.renderables if isinstance(help_text, Columns) else [help_text]
            for part in parts:
                if isinstance(part, Text):
                    part.overflow = "fold"

    typer.rich_utils.Table = HelpTable  # type: ignore[misc]


_keep_option_names_whole()

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Make PyTorch modules faster with CUDA C++ extensions written by an LLM agent, judged by a trusted referee.",
)


def version_line() -> str:
    """The package's version with the torch and CUDA it runs on, for bug reports."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = version("kernel-agent")
    except PackageNotFoundError:
        package = "unknown (not installed: pip install -e .)"
    try:
        import torch
    except ImportError:
        return f"kernel-agent {package} (torch not installed)"
    cuda = torch.version.cuda or "none (a CPU-only torch)"
    return f"kernel-agent {package} (torch {torch.__version__}, CUDA {cuda})"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_print_version,
        help="Print the kernel-agent, torch and CUDA versions and exit.",
    ),
) -> None:
    pass


# In the order `agent --help` lists them.
app.command("tasks")(tasks_command)
app.command("compile")(compile_command)
app.command("solve")(solve_command)
app.command("eval")(eval_command)
app.command("batch")(batch_command)
app.command("report")(report_command)
app.command("tune")(tune_command)
app.command("profile")(profile_command)
app.add_typer(sandbox_app, name="sandbox")
app.command("replay")(replay_command)
app.command("show")(show_command)
app.command("export")(export_command)
app.command("export-tasks")(export_tasks_command)


def main() -> None:
    app(prog_name="agent")


if __name__ == "__main__":
    sys.exit(main())

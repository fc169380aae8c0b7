"""Judge and inspect: `agent eval TASK SOLUTION` (compile, verify and profile a solution; print the
verdict), `agent compile SOLUTION` and `agent tasks FOLDER`. agent/cli/app.py registers them;
`eval_app` runs `eval` alone.

`agent eval`'s exit status: 0 correct, 1 any other verdict, 2 a usage or setup error, 3 no GPU
visible (the compile stage still ran).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from agent.cli.common import (
    DEFAULT_INSPECT_TIMEOUT_S,
    ArchOpt,
    InspectTimeoutOpt,
    JsonFlag,
    SandboxOpt,
    UnsandboxedFlag,
    arch_option,
    check_confinement,
    check_seconds,
    checked_options,
    compile_mode_option,
    console,
    err_console,
    fail,
    inspect_timeout_option,
    json_flag,
    policy_option,
    precision_option,
    profile_option,
    refresh_baselines_option,
    sandbox_option,
    trials_option,
)
from agent.cli.common import EXIT_USAGE as EXIT_USAGE

if TYPE_CHECKING:
    from agent.build.compile import CompileResult

EXIT_FAILED, EXIT_NO_GPU = 1, 3  # and EXIT_USAGE (2), agent.cli.common's
MAX_ERRORS_SHOWN = 5
POLICIES = ("strict", "kernelbench")


def _status(message: str, *, quiet: bool) -> AbstractContextManager[object]:
    """A spinner with `message` on stderr when it is a terminal; nothing with --json or when piped."""
    if quiet or not err_console.is_terminal:
        return nullcontext()
    return err_console.status(message)


def _defines(path: Path) -> set[str]:
    """Top-level names a .py file defines, without running it (empty when it does not parse)."""
    import ast

    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return set()
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef)}


def _check_eval_inputs(task: Path, solution: Path) -> None:
    """TASK then SOLUTION, and not the other way round; both there."""
    from agent.tasks import TaskLoadError, parse_task
    from agent.workspace import MODEL_ENTRY

    task_is_solution = (task.is_dir() and (task / MODEL_ENTRY).is_file()) or (
        task.is_file() and "ModelNew" in _defines(task) and "Model" not in _defines(task)
    )
    solution_is_task = solution.is_file() and {"Model", "get_inputs"} <= _defines(solution)
    if task_is_solution or (solution_is_task and "ModelNew" not in _defines(solution)):
        what = (
            f"TASK {task} looks like a solution (it defines ModelNew)"
            if task_is_solution
            else (f"SOLUTION {solution} looks like a task (it defines Model and get_inputs)")
        )
        fail(f"{what}: swap the arguments; the order is agent eval TASK SOLUTION")
    try:
        parse_task(task)
    except TaskLoadError as exc:
        fail(str(exc))
    if not solution.exists():
        fail(f"{solution}: no such solution (a workspace folder or a single-file .py solution)")


def eval_command(
    task: Annotated[Path, typer.Argument(help="The task file (KernelBench format).")],
    solution: Annotated[
        Path, typer.Argument(help="A workspace folder or a single-file KernelBench solution.")
    ],
    policy: Annotated[
        str, policy_option("strict (CUDA-Agent rules) or kernelbench (torch glue allowed).")
    ] = "strict",
    trials: Annotated[int, trials_option()] = 5,
    profile: Annotated[bool, profile_option()] = True,
    compile_mode: Annotated[str, compile_mode_option()] = "default",
    arch: Annotated[str | None, arch_option("GPU architecture to build for (sm_90, 9.0, ...).")] = None,
    sandbox: Annotated[str, sandbox_option("Where the candidate runs: local, docker or auto.")] = "local",
    precision: Annotated[str, precision_option()] = "fp32",
    tolerance: Annotated[
        str,
        typer.Option("--tolerance", help="default (the precision's: fp32 atol=rtol=1e-3) or tight."),
    ] = "default",
    refresh_baselines: Annotated[bool, refresh_baselines_option()] = False,
    inspect_timeout: InspectTimeoutOpt = DEFAULT_INSPECT_TIMEOUT_S,
    as_json: Annotated[bool, json_flag("Print the EvalResult as JSON.")] = False,
    unsandboxed: UnsandboxedFlag = False,
) -> None:
    """Judge a solution: compile, verify on fresh secret inputs, time against eager and torch.compile."""
    check_seconds("--inspect-timeout", inspect_timeout)
    if policy not in POLICIES:
        fail(f"--policy {policy!r}: unknown policy; choose one of {', '.join(POLICIES)}")
    if trials < 1:
        fail(f"--trials {trials}: give at least 1 correctness trial")
    _check_eval_inputs(task, solution)
    check_confinement(sandbox, unsandboxed)
    from agent.build.toolkit import ToolkitError
    from agent.referee import EvalOptions, evaluate
    from agent.referee.report import verdict_table
    from agent.tasks import TaskLoadError, load_task
    from agent.workspace import WorkspaceError
    from sandbox.base import SandboxError

    options = checked_options(
        EvalOptions,
        policy=policy,
        precision=precision,
        tolerance=tolerance,
        trials=trials,
        profile=profile,
        compile_mode=compile_mode,
        arch=arch,
        refresh_baselines=refresh_baselines,
    )
    try:
        with _status(f"judging {solution} (compile, verify, profile) ...", quiet=as_json):
            loaded = load_task(task, timeout=inspect_timeout, sandbox_kind=sandbox)
            result = evaluate(loaded, solution, options, sandbox=sandbox)
    except (TaskLoadError, WorkspaceError, SandboxError, ToolkitError, ValueError) as exc:
        fail(str(exc))
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


def tasks_command(
    folder: Annotated[
        Path, typer.Argument(help="A task file or a folder of them (e.g. KernelBench/level1).")
    ],
    as_json: JsonFlag = False,
    instantiate: Annotated[
        bool, typer.Option(help="Run each task once, in the sandbox, to learn its input spec.")
    ] = True,
    sandbox: Annotated[str, sandbox_option("Where the task files run: local, docker or auto.")] = "local",
    timeout: Annotated[
        float,
        inspect_timeout_option(
            "Seconds each task file may take to run once (in the sandbox) to learn its inputs.",
            "--timeout",
        ),
    ] = DEFAULT_INSPECT_TIMEOUT_S,
    unsandboxed: UnsandboxedFlag = False,
) -> None:
    """List tasks with their level, hash and input spec."""
    check_seconds("--inspect-timeout", timeout)
    from agent.cli.task_errors import print_load_errors
    from agent.tasks import TaskLoadError, load_folder
    from sandbox.base import SandboxError

    if instantiate:
        check_confinement(sandbox, unsandboxed)
    try:
        with _status(f"loading tasks from {folder} ...", quiet=as_json):
            found, errors = load_folder(
                folder, instantiate=instantiate, timeout=timeout, sandbox_kind=sandbox
            )
    except (TaskLoadError, SandboxError) as exc:
        fail(str(exc))
    if not found and not errors:
        fail(f"{folder}: no task files (*.py) in this folder")
    if as_json:
        import json

        print(
            json.dumps(
                {
                    "tasks": [t.model_dump(mode="json") for t in found],
                    "errors": [{"path": str(e.path), "line": e.line, "problem": e.problem} for e in errors],
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
        if found or errors:
            console.print(table)
        print_load_errors(errors, err_console)
    if errors:
        raise typer.Exit(1)


def compile_command(
    solution: Annotated[
        Path, typer.Argument(help="A workspace folder or a single-file KernelBench solution.")
    ],
    arch: ArchOpt = None,
    sandbox: SandboxOpt = "local",
    timeout: Annotated[float, typer.Option(help="Seconds before the build is killed.")] = 600,
    as_json: JsonFlag = False,
    unsandboxed: UnsandboxedFlag = False,
) -> None:
    """Build a solution's CUDA extension and report success with timings or the first real errors.

    A bare solution folder (model files only) is built from a copy under the cache, so the
    harness files a build needs never land in it; a harness-made workspace is built in place."""
    check_seconds("--timeout", timeout)
    if not solution.exists():
        fail(f"{solution}: no such solution (a workspace folder or a single-file .py solution)")
    check_confinement(sandbox, unsandboxed)
    from agent.build.toolkit import ToolkitError, check_arch

    if arch is not None:
        try:
            check_arch(arch)
        except ToolkitError as exc:
            fail(str(exc))
    from agent.build.compile import compile_solution
    from agent.workspace import Workspace, WorkspaceError, build_copy, open_solution
    from sandbox.base import SandboxError, open_sandbox

    try:
        target = open_solution(solution)
        if isinstance(target, Workspace) and not target.is_harness_made():
            target = build_copy(target)
        with (
            _status(f"compiling {solution} ...", quiet=as_json),
            open_sandbox(sandbox, workspace=target.root) as box,
        ):
            result = compile_solution(target, box, arch=arch, timeout=timeout)
    except (WorkspaceError, SandboxError, ToolkitError) as exc:
        fail(str(exc))
    if as_json:
        print(result.model_dump_json(indent=2))
    elif result.ok:
        console.print(f"[green]✓[/] {result.feedback()}  [dim]({result.mode}; {result.build_dir})[/]")
        if result.arch_source.startswith("no GPU"):
            console.print(f"[dim]{result.arch_source}[/]")
        from agent.build.resources import render_resources

        if resources := render_resources(result.resources):
            console.print(resources, highlight=False, markup=False, soft_wrap=True)
    if not result.ok:
        _print_build_failure(result, solution, quiet=as_json)


def _print_build_failure(result: CompileResult, solution: Path, *, quiet: bool) -> NoReturn:
    """Each error once: listed on stdout (files named as the user named them, duplicates dropped),
    then one line on stderr that says where the first one is."""
    errors = []
    for error in result.errors:
        if error.file is not None:
            where = solution if solution.is_file() else solution / error.file
            error = error.model_copy(update={"file": str(where)})
        if error.render() not in (e.render() for e in errors):
            errors.append(error)
    if not errors:
        fail(
            f"the build failed ({result.status}): {result.message or 'no error was reported'}",
            code=EXIT_FAILED,
        )
    if not quiet:
        head = f"compile failed ({result.status})" + (f": {result.message}" if result.message else "")
        console.print(f"[red]✗[/] {escape(head)}", highlight=False)
        for error in errors[:MAX_ERRORS_SHOWN]:
            console.print(error.render(), highlight=False, markup=False)
        if len(errors) > MAX_ERRORS_SHOWN:
            console.print(f"... and {len(errors) - MAX_ERRORS_SHOWN} more errors", highlight=False)
        if result.log_path:
            console.print(f"full log: {result.log_path}", highlight=False, markup=False, soft_wrap=True)
    first = errors[0]
    where = "".join(
        [first.file or "the build", *(f":{n}" for n in (first.line, first.column) if n is not None)]
    )
    count = f"{len(errors)} errors, the first" if len(errors) > 1 else "1 error"
    fail(f"the build failed: {count} at {where}" + ("" if quiet else " (above)"), code=EXIT_FAILED)


eval_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
eval_app.command("eval")(eval_command)

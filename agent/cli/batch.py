"""`agent batch` and `agent report`: typer command functions, registered by agent/cli/app.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

err_console = Console(stderr=True, soft_wrap=True)  # paths in messages stay whole


def _console() -> Console:
    """Rich's width on a terminal; wide tables when the output goes to a file or a pipe."""
    console = Console()
    return console if console.is_terminal else Console(width=220)


RUN = "What to run"
JUDGE = "How candidates are judged"
SCHED = "Scheduling"
STORE = "Store and resume"


def _fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def batch_command(
    tasks: Annotated[
        list[Path], typer.Argument(help="Task files or folders (e.g. KernelBench/level1 benchmarks/tasks).")
    ],
    model: Annotated[
        str | None,
        typer.Option("--model", help="Run the agent with this model on every task.", rich_help_panel=RUN),
    ] = None,
    solutions: Annotated[
        Path | None,
        typer.Option(
            "--solutions",
            help="Judge existing solutions only: KernelBench generations (level_1_problem_19_sample_0_kernel.py) "
            "or workspaces (levelN/<task>/ and <task>__<variant>/).",
            rich_help_panel=RUN,
        ),
    ] = None,
    samples: Annotated[int, typer.Option(help="Agent runs per task.", rich_help_panel=RUN)] = 1,
    budget: Annotated[
        str | None,
        typer.Option(help="Budget of each agent run (as `agent solve --budget`).", rich_help_panel=RUN),
    ] = None,
    sandbox: Annotated[str, typer.Option(help="local, docker or auto.", rich_help_panel=JUDGE)] = "local",
    policy: Annotated[str, typer.Option(help="Referee policy.", rich_help_panel=JUDGE)] = "strict",
    trials: Annotated[int, typer.Option(help="Correctness trials.", rich_help_panel=JUDGE)] = 5,
    profile: Annotated[
        bool, typer.Option(help="Time candidates and baselines.", rich_help_panel=JUDGE)
    ] = True,
    compile_mode: Annotated[
        str, typer.Option(help="torch.compile baseline mode ('none' to skip).", rich_help_panel=JUDGE)
    ] = "default",
    arch: Annotated[
        str | None, typer.Option(help="GPU architecture to build for.", rich_help_panel=JUDGE)
    ] = None,
    refresh_baselines: Annotated[
        bool, typer.Option(help="Re-time baselines (once per task).", rich_help_panel=JUDGE)
    ] = False,
    gpus: Annotated[
        str | None, typer.Option(help="GPUs to use, e.g. 0,1 (default: all visible).", rich_help_panel=SCHED)
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Tasks in flight (agent runs or evaluations).", rich_help_panel=SCHED)
    ] = None,
    compile_workers: Annotated[
        int | None, typer.Option(help="Concurrent builds (default: CPU cores).", rich_help_panel=SCHED)
    ] = None,
    evals_per_gpu: Annotated[
        int,
        typer.Option(
            min=1,
            help="Evaluations judged at once on each GPU; the referee keeps their timings exclusive "
            "(the docker sandbox: always 1).",
            rich_help_panel=SCHED,
        ),
    ] = 4,
    executor: Annotated[str, typer.Option(help="local or ray.", rich_help_panel=SCHED)] = "local",
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address (with --executor ray).", rich_help_panel=SCHED)
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Output folder (attempts, store, report).", rich_help_panel=STORE)
    ] = Path("runs/batch"),
    store: Annotated[
        Path | None, typer.Option(help="SQLite store (default: OUT/store.sqlite).", rich_help_panel=STORE)
    ] = None,
    redo: Annotated[
        list[str] | None,
        typer.Option(
            help="Rerun these tasks (name, levelN/name or glob); repeatable.", rich_help_panel=STORE
        ),
    ] = None,
    retry_errors: Annotated[
        bool, typer.Option(help="Redo attempts that ended in an error.", rich_help_panel=STORE)
    ] = True,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Log lines instead of the live display.")
    ] = False,
) -> None:
    """Run the agent on every task of some folders, or judge existing solutions, into a resumable store."""
    from agent.batch.config import BatchConfig, EvalOptions
    from agent.batch.progress import LiveProgress, LogProgress
    from agent.batch.report import build_reports, print_report, write_reports
    from agent.batch.runner import run_batch
    from agent.batch.scheduler import visible_gpus
    from agent.build.toolkit import ToolkitError, resolve_arch

    if (model is None) == (solutions is None):
        raise _fail("give exactly one of --model SPEC (run the agent) or --solutions DIR (judge solutions)")
    if executor not in ("local", "ray"):
        raise _fail(f"--executor {executor!r}: use local or ray")
    if model is not None:
        from agent.models import ModelSpecError, check_credentials

        try:
            missing = check_credentials(model)
        except ModelSpecError as exc:
            raise _fail(str(exc)) from None
        if missing:
            raise _fail(missing)
    try:
        arch_value, _ = resolve_arch(arch)
    except ToolkitError as exc:
        raise _fail(str(exc)) from None
    gpu_list = [g.strip() for g in gpus.split(",") if g.strip()] if gpus else visible_gpus()
    if not gpu_list and executor == "local":
        if model is not None:
            raise _fail(
                "no CUDA GPU is visible here: agent runs need one to verify and profile (or --executor ray)"
            )
        err_console.print(
            "[yellow]no CUDA GPU is visible here: solutions are compiled, and every verdict is no_gpu "
            "(recorded as errors, redone by a rerun on a GPU machine)[/]"
        )
    if evals_per_gpu > 1 and sandbox == "docker":
        err_console.print(
            "[yellow]--sandbox docker: its containers cannot take the GPU gates, so each GPU judges "
            "one evaluation at a time (--evals-per-gpu ignored)[/]"
        )
    workers = compile_workers or os.cpu_count() or 1
    # Every GPU slot busy, with one compiled candidate more per slot waiting behind it.
    default_concurrency = 8 if model else workers + 2 * evals_per_gpu * max(1, len(gpu_list))
    config = BatchConfig(
        tasks=tasks,
        mode="agent" if model else "solutions",
        model=model,
        solutions=solutions,
        samples=samples,
        out=out,
        store=store or out / "store.sqlite",
        gpus=gpu_list,
        concurrency=concurrency or default_concurrency,
        compile_workers=workers,
        evals_per_gpu=evals_per_gpu,
        executor=executor,  # type: ignore[arg-type]
        address=address,
        eval=EvalOptions(
            sandbox=sandbox,
            policy=policy,
            trials=trials,
            profile=profile,
            compile_mode=None if compile_mode == "none" else compile_mode,
            arch=arch_value,
            refresh_baselines=refresh_baselines,
        ),
        redo=redo or [],
        retry_errors=retry_errors,
        solve_options={"budget": budget} if budget else {},
    )
    progress = LogProgress() if quiet else LiveProgress()
    summary = run_batch(config, progress=progress)
    reports = build_reports(config.store, summary.batch_key)
    console = _console()
    for report in reports:
        print_report(report, console, candidates=False)
    md, html = write_reports(reports, config.out)
    console.print(f"store: {config.store}\nreport: {md} {html}", highlight=False)
    if summary.interrupted:
        raise typer.Exit(130)
    if summary.counts.get("error"):
        err_console.print(
            f"[yellow]{summary.counts['error']} attempt(s) ended in an error; rerun to retry them[/]"
        )
        raise typer.Exit(1)


def report_command(
    store: Annotated[Path, typer.Argument(help="A batch store (store.sqlite) or the batch's output folder.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Where to write report.md and report.html (default: beside the store)."),
    ] = None,
    batch: Annotated[
        str | None, typer.Option(help="Only this batch key (default: every batch in the store).")
    ] = None,
    candidates: Annotated[bool, typer.Option(help="Also print the per-candidate table.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the reports as JSON.")] = False,
) -> None:
    """Print KernelBench metrics (fast_p, geomean speedup, per level) and cost; write report.md and report.html."""
    from agent.batch.report import build_reports, print_report, write_reports

    path = store / "store.sqlite" if store.is_dir() else store
    if not path.is_file():
        raise _fail(f"{path}: no batch store here (agent batch writes OUT/store.sqlite)")
    reports = build_reports(path, batch)
    console = _console()
    if as_json:
        import json

        print(json.dumps([r.model_dump(mode="json") for r in reports], indent=2))
    else:
        for report in reports:
            print_report(report, console, candidates=candidates)
    md, html = write_reports(reports, out or path.parent)
    if not as_json:
        console.print(f"wrote {md} and {html}", highlight=False)


def register(app: typer.Typer) -> None:
    """What agent/cli/app.py calls: `agent batch` and `agent report`."""
    app.command("batch")(batch_command)
    app.command("report")(report_command)

"""`agent batch` and `agent report`: typer command functions, registered by agent/cli/app.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from agent.batch.report import BatchReport

from agent.cli.common import (
    CONTEXT_TOKENS_HELP,
    DEFAULT_INSPECT_TIMEOUT_S,
    arch_option,
    budget_option,
    check_confinement,
    check_count,
    check_output_folder,
    check_seconds,
    checked_options,
    compile_mode_option,
    context_options,
    err_console,
    fail,
    inspect_timeout_option,
    json_flag,
    policy_option,
    precision_option,
    profile_option,
    refresh_baselines_option,
    request_timeout_option,
    sandbox_option,
    trials_option,
    unsandboxed_option,
)
from agent.models.registry import REQUEST_TIMEOUT_HELP, TEMPLATES_MODEL

WIDE_WIDTH = 240
"""The width of `--wide` tables when the output goes to a file or a pipe."""


def _console(wide: bool = False) -> Console:
    """Rich's width (the terminal's, else $COLUMNS or 80): the narrow tables fit it. `--wide`
    tables get the terminal's width, or WIDE_WIDTH in a file or a pipe."""
    console = Console()
    return Console(width=WIDE_WIDTH) if wide and not console.is_terminal else console


def _gpu_ids(gpus: str) -> list[str]:
    """`--gpus 0,1`: comma-separated GPU indices (non-negative integers)."""
    ids = [g.strip() for g in gpus.split(",")]
    if not ids or any(not g.isdigit() for g in ids):
        fail(f"--gpus {gpus!r}: give GPU indices separated by commas, e.g. 0 or 0,1")
    return ids


def _check_tasks(paths: list[Path]) -> None:
    """Every task path exists and holds at least one task file."""
    from agent.tasks import TaskLoadError, discover_task_files

    for path in paths:
        try:
            files = discover_task_files(path)
        except TaskLoadError:
            fail(f"{path}: no such task file or folder")
        if not files:
            fail(f"{path}: no task files (*.py) in this folder")


def _check_solutions(solutions: Path, tasks: list[Path]) -> None:
    """`--solutions` is a folder with at least one solution that matches one of the tasks."""
    from agent.batch.layouts import discover_solutions
    from agent.tasks import TaskLoadError, load_folder

    if not solutions.exists():
        fail(f"--solutions {solutions}: no such folder")
    if not solutions.is_dir():
        fail(f"--solutions {solutions}: not a folder")
    parsed = []
    for path in tasks:
        try:
            parsed += load_folder(path, instantiate=False)[0]
        except TaskLoadError:
            continue
    try:
        found = discover_solutions(solutions, parsed)
    except ValueError as exc:
        fail(f"--solutions {solutions}: {exc}")
    if not found.items:
        what = f"{len(found.unmatched)} match none of the tasks given" if found.unmatched else "none found"
        fail(
            f"--solutions {solutions}: no solution to judge ({what}; expected "
            "level_N_problem_M_sample_K_kernel.py files or levelN/<task>/model_new.py workspaces)"
        )


def _check_ray_gpus(address: str | None) -> None:
    """--executor ray: Ray is installed and its cluster (a new local one without --address) has a
    node with a GPU, before anything is created. The connection stays for the batch's evaluator."""
    import logging

    from agent.batch.executors.ray import import_ray

    where = f"the Ray cluster at {address}" if address else "the local Ray cluster (no --address)"
    try:
        ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=address, logging_level=logging.ERROR, include_dashboard=False)
        has_gpu = any(n.get("Alive") and n.get("Resources", {}).get("GPU", 0) > 0 for n in ray.nodes())
    except ImportError as exc:
        fail(str(exc))
    except Exception as exc:  # Ray's own errors (no cluster at the address, a failed start)
        fail(f"--executor ray: cannot connect to {where}: {str(exc).strip().splitlines()[0]}")
    if not has_gpu:
        ray.shutdown()
        fail(
            f"--executor ray: {where} has no node with a GPU; evaluations need one "
            "(start Ray on GPU machines and pass --address HOST:PORT)"
        )


RUN = "What to run"
JUDGE = "How candidates are judged"
SCHED = "Scheduling"
STORE = "Store and resume"


def batch_command(
    tasks: Annotated[
        list[Path], typer.Argument(help="Task files or folders (e.g. KernelBench/level1 benchmarks/tasks).")
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Run the agent with this model on every task (as `agent solve --model`; templates: the "
            "built-in template policy, no API key, tasks it does not cover recorded as such).",
            rich_help_panel=RUN,
        ),
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
        budget_option("Budget of each agent run (as `agent solve --budget`).", rich_help_panel=RUN),
    ] = None,
    request_timeout: Annotated[
        str | None, typer.Option("--request-timeout", help=REQUEST_TIMEOUT_HELP, rich_help_panel=RUN)
    ] = None,
    region_allocation: Annotated[
        str | None,
        typer.Option(
            "--region-allocation",
            help="--model templates on a model covered region by region: split each run's candidates by "
            "expected gain (gain, the default) or the same to every covered region (uniform).",
            rich_help_panel=RUN,
        ),
    ] = None,
    context_tokens: Annotated[
        str | None, typer.Option("--context-tokens", help=CONTEXT_TOKENS_HELP, rich_help_panel=RUN)
    ] = None,
    sandbox: Annotated[str, sandbox_option("local, docker or auto.", rich_help_panel=JUDGE)] = "local",
    policy: Annotated[str, policy_option("Referee policy.", rich_help_panel=JUDGE)] = "strict",
    precision: Annotated[
        str, precision_option("fp32 (default), tf32, fp16, bf16 or match.", rich_help_panel=JUDGE)
    ] = "fp32",
    trials: Annotated[int, trials_option("Correctness trials.", rich_help_panel=JUDGE)] = 5,
    profile: Annotated[bool, profile_option("Time candidates and baselines.", rich_help_panel=JUDGE)] = True,
    compile_mode: Annotated[
        str, compile_mode_option("torch.compile baseline mode ('none' to skip).", rich_help_panel=JUDGE)
    ] = "default",
    arch: Annotated[str | None, arch_option("GPU architecture to build for.", rich_help_panel=JUDGE)] = None,
    refresh_baselines: Annotated[
        bool,
        refresh_baselines_option("Re-time baselines (once per task).", negatable=True, rich_help_panel=JUDGE),
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
    inspect_timeout: Annotated[
        float, inspect_timeout_option(rich_help_panel=RUN)
    ] = DEFAULT_INSPECT_TIMEOUT_S,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Log lines instead of the live display.")
    ] = False,
    wide: Annotated[bool, typer.Option("--wide", help="Every column of the report (wider than 80).")] = False,
    as_json: Annotated[bool, json_flag("Print the report(s) as JSON; no progress display.")] = False,
    unsandboxed: Annotated[bool, unsandboxed_option(rich_help_panel=JUDGE)] = False,
) -> None:
    """Run the agent on every task of some folders, or judge existing solutions, into a resumable store."""

    from agent.batch.config import BatchConfig, JudgingOptions
    from agent.batch.progress import LiveProgress, LogProgress, NullProgress, ProgressState
    from agent.batch.report import NothingToReport, build_reports
    from agent.batch.report_files import write_reports
    from agent.batch.runner import run_batch
    from agent.batch.scheduler import visible_gpus
    from agent.batch.store import StoreError
    from agent.build.toolkit import ToolkitError, resolve_arch

    # Every input is checked before the GPU probe and before anything is created.
    if (model is None) == (solutions is None):
        fail("give exactly one of --model SPEC (run the agent) or --solutions DIR (judge solutions)")
    if executor not in ("local", "ray"):
        fail(f"--executor {executor!r}: use local or ray")
    check_count("--concurrency", concurrency, "tasks in flight")
    check_count("--compile-workers", compile_workers, "concurrent builds")
    check_count("--samples", samples, "agent runs per task")
    if region_allocation not in (None, "gain", "uniform"):
        fail(f"--region-allocation {region_allocation!r}: choose one of gain, uniform")
    check_seconds("--inspect-timeout", inspect_timeout)
    gpu_ids = _gpu_ids(gpus) if gpus is not None else None
    from agent.budget import BudgetLimits, BudgetSpecError

    try:
        limits = BudgetLimits().with_spec(budget)  # parsed once, handed to the config
    except BudgetSpecError as exc:
        fail(str(exc))
    request_timeout_s = request_timeout_option(request_timeout)
    context = context_options(context_tokens)
    from sandbox.base import sandbox_kinds

    kinds = sorted({*sandbox_kinds(), "auto"})
    if sandbox not in kinds:
        fail(f"--sandbox {sandbox!r}: choose one of {', '.join(kinds)}")
    check_confinement(sandbox, unsandboxed)
    judging = checked_options(
        JudgingOptions,
        sandbox=sandbox,
        policy=policy,
        precision=precision,
        trials=trials,
        profile=profile,
        compile_mode=None if compile_mode == "none" else compile_mode,
        arch=None,
        refresh_baselines=refresh_baselines,
    )
    if model is not None and model != TEMPLATES_MODEL:
        from agent.models import ModelSpecError, check_credentials

        try:
            missing = check_credentials(model)
        except ModelSpecError as exc:
            fail(str(exc))
        if missing:
            fail(missing)
    _check_tasks(tasks)
    if solutions is not None:
        _check_solutions(solutions, tasks)
    store_path = store or out / "store.sqlite"
    for path, flag in ((out, "--out"), (store_path.parent, "--store")):
        check_output_folder(flag, path)
    if store_path.exists():
        from agent.batch.store import StoreError, check_store_file

        try:
            check_store_file(store_path)
        except StoreError as exc:
            fail(str(exc))
    # The GPU probe.
    try:
        arch_value, _ = resolve_arch(arch)
    except ToolkitError as exc:
        fail(str(exc))
    judging = judging.model_copy(update={"arch": arch_value})
    if executor == "ray":
        _check_ray_gpus(address)
    gpu_list = gpu_ids if gpu_ids is not None else visible_gpus()
    if not gpu_list and executor == "local":
        if model is not None:
            fail("no CUDA GPU is visible here: agent runs need one to verify and profile (or --executor ray)")
        err_console.print(
            "[yellow]no CUDA GPU is visible here: solutions are compiled, and every verdict is no_gpu "
            "(recorded as errors, redone by a rerun on a GPU machine)[/]"
        )
    workers = compile_workers or os.cpu_count() or 1
    # Every GPU slot busy, with one compiled candidate more per slot waiting behind it.
    default_concurrency = 8 if model else workers + 2 * evals_per_gpu * max(1, len(gpu_list))
    config = BatchConfig.model_validate(
        {
            "tasks": tasks,
            "mode": "agent" if model else "solutions",
            "model": model,
            "solutions": solutions,
            "samples": samples,
            "out": out,
            "store": store_path,
            "gpus": gpu_list,
            "concurrency": concurrency or default_concurrency,
            "compile_workers": workers,
            "evals_per_gpu": evals_per_gpu,
            "executor": executor,
            "address": address,
            "eval": judging,
            "redo": redo or [],
            "retry_errors": retry_errors,
            "solve_options": ({"budget": budget} if budget else {})
            | ({"region_allocation": region_allocation} if region_allocation else {})
            | context,
            "request_timeout_s": request_timeout_s,
            "inspect_timeout_s": inspect_timeout,
        },
        context={"budget": limits},
    )
    if as_json:
        progress: ProgressState = NullProgress()
    elif quiet or not err_console.is_terminal:
        progress = LogProgress()
    else:
        progress = LiveProgress()
    from agent.run.signals import interrupt_on_signals

    try:
        with interrupt_on_signals():
            summary = run_batch(config, progress=progress)
    except StoreError as exc:  # another writer held the store past the wait
        fail(str(exc))
    try:
        reports = build_reports(config.store, summary.batch_key)
        md, html = write_reports(reports, config.out)
    except (StoreError, NothingToReport) as exc:
        fail(str(exc))
    console = _show(reports, as_json=as_json, wide=wide, candidates=False)
    if console is not None:
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
    as_json: Annotated[bool, json_flag("Print the reports as JSON.")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="Every column (wider than 80).")] = False,
) -> None:
    """Print KernelBench metrics (fast_p, geomean speedup, per level) and cost; write report.md and report.html."""
    from agent.batch.report import NothingToReport, build_reports
    from agent.batch.report_files import write_reports
    from agent.batch.store import StoreError

    path = store / "store.sqlite" if store.is_dir() else store
    if not path.is_file():
        fail(f"{path}: no batch store here (agent batch writes OUT/store.sqlite)")
    if out is not None:
        if not out.exists() and not out.parent.is_dir():
            fail(f"--out {out}: its parent folder {out.parent} does not exist")
        check_output_folder("--out", out)
    try:
        reports = build_reports(path, batch)
    except (StoreError, NothingToReport) as exc:
        fail(str(exc))
    console = _show(reports, as_json=as_json, wide=wide, candidates=candidates)
    try:
        md, html = write_reports(reports, out or path.parent)
    except OSError as exc:
        fail(f"{out or path.parent}: cannot write the report ({exc.strerror or exc})")
    if console is not None:
        console.print(f"wrote {md} and {html}", highlight=False)


def _show(reports: list[BatchReport], *, as_json: bool, wide: bool, candidates: bool) -> Console | None:
    """Print the reports: as JSON (returns None), or as tables on the console it returns."""
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in reports], indent=2))
        return None
    from agent.batch.report import print_report

    console = _console(wide)
    for report in reports:
        print_report(report, console, candidates=candidates, wide=wide)
    return console


def register(app: typer.Typer) -> None:
    """What agent/cli/app.py calls: `agent batch` and `agent report`."""
    app.command("batch")(batch_command)
    app.command("report")(report_command)

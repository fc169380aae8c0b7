"""`agent replay`, `agent show` and `agent export`: registered by agent/cli/app.py as
`app.command("replay")(replay_command)` and likewise for show and export."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent.cli.common import (
    UnsandboxedFlag,
    arch_option,
    check_confinement,
    check_output_folder,
    console,
    fail,
    json_flag,
    sandbox_option,
)
from agent.transcripts.divergence import DEFAULT_RUN_TO_RUN_CV

if TYPE_CHECKING:
    from agent.run.replay import ReplayReport

TranscriptArg = Annotated[Path, typer.Argument(help="A transcript.jsonl written by `agent solve`.")]


def replay_command(
    transcript: TranscriptArg,
    sandbox: Annotated[str, sandbox_option("Where the tool calls re-run: local, docker or auto.")] = "local",
    arch: Annotated[
        str | None, arch_option("GPU architecture to build for; default: this machine's GPU.")
    ] = None,
    task: Annotated[
        Path | None,
        typer.Option("--task", help="The task file, when the recorded path is not on this machine."),
    ] = None,
    stop_at_first_divergence: Annotated[
        bool,
        typer.Option("--stop-at-first-divergence", help="End the replay after the turn that first diverges."),
    ] = False,
    final_only: Annotated[
        bool, typer.Option("--final-only", help="Re-judge only the run's best solution, not every tool call.")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Folder for the replay's own run (default: a new temporary one)."),
    ] = None,
    as_json: Annotated[bool, json_flag("Print the report as JSON.")] = False,
    run_to_run_cv: Annotated[
        float,
        typer.Option(
            "--run-to-run-cv",
            min=0.0,
            max=0.5,
            help="Relative run-to-run spread of a speedup (0.03 = 3%); the default was measured on the H200 "
            "(the largest in benchmarks/results/eval_bench_h200*.md). Two speedups agree within their in-run bands or "
            "within 3 sigma of this spread; 0 keeps the in-run bands alone.",
        ),
    ] = DEFAULT_RUN_TO_RUN_CV,
    unsandboxed: UnsandboxedFlag = False,
) -> None:
    """Re-run a recorded transcript's turns on this machine and report where tool results diverge.

    Compared: compile outcome, verdict, files, speedup beyond noise. Needs a GPU (except to replay a dry run).

    Exit code 0: no divergence; 1: divergence; 2: it could not start."""
    from agent.run.replay import ReplayError, rejudge_final, replay_run
    from agent.run.solve import SolveError
    from agent.transcripts.divergence import NoiseRule
    from agent.transcripts.format import TranscriptError
    from sandbox.base import SandboxError

    if out is not None and out.exists() and not out.is_dir():
        fail(f"--out {out}: is a file; give a new or empty folder")
    if out is not None and out.exists() and any(out.iterdir()):
        fail(f"--out {out}: the folder exists and is not empty; pick a new one")
    if out is not None:
        check_output_folder("--out", out)
    check_confinement(sandbox, unsandboxed)
    target = out or Path(tempfile.mkdtemp(prefix="agent-replay-"))
    noise = NoiseRule(run_to_run_cv=run_to_run_cv)
    done = False
    try:
        try:
            if final_only:
                report = rejudge_final(
                    transcript, out=target, sandbox=sandbox, arch=arch, task=task, noise=noise
                )
            else:
                report = replay_run(
                    transcript,
                    out=target,
                    sandbox=sandbox,
                    arch=arch,
                    task=task,
                    stop_at_first_divergence=stop_at_first_divergence,
                    noise=noise,
                )
        except (TranscriptError, ReplayError, SolveError, SandboxError) as exc:
            fail(str(exc))
        (target / "replay.json").write_text(report.model_dump_json(indent=2))
        done = True
    finally:
        if out is None and not done:
            # The temporary folder this command made holds nothing a user asked for.
            shutil.rmtree(target, ignore_errors=True)
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        print_report(report, console)
    raise typer.Exit(1 if report.diverged else 0)


def print_report(report: ReplayReport, out: Console) -> None:
    table = Table(title=f"replay of {report.transcript} ({report.mode})")
    for column in ("step", "turn", "tool", "call", "result", "differences", "speedups"):
        table.add_column(column, overflow="fold")
    for step in report.steps:
        style = "green" if step.status == "match" else "red"
        differences = "\n".join(
            f"{d.kind}: {d.recorded} → {d.replayed}" for d in step.differences if d.kind != "speedup"
        )
        speedups = "\n".join(check.describe() for check in step.speedups)
        table.add_row(
            str(step.index),
            str(step.turn),
            step.tool,
            step.call_id,
            Text(step.status, style=style),
            Text(differences),
            Text(speedups),
        )
    out.print(table)
    out.print(
        f"recorded on {report.recorded_gpu or 'no GPU'}, replayed on {report.replay_gpu or 'no GPU'}",
        highlight=False,
    )
    out.print(f"rule: {report.noise.describe()}", highlight=False)
    out.print(f"replay output: {report.out}", highlight=False)
    mark = "[red]✗[/]" if report.diverged else "[green]✓[/]"
    out.print(f"{mark} {report.summary()}", highlight=False)


def show_command(
    transcript: TranscriptArg,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML page here instead of printing.")
    ] = None,
    full: Annotated[bool, typer.Option("--full", help="Show prompts and tool results uncut.")] = False,
    summary_only: Annotated[
        bool,
        typer.Option("--summary", help="Print only the summary: outcome, best speedups, turns, cost, time."),
    ] = False,
) -> None:
    """Show a transcript: a summary, then turns, tool calls, diffs of the model's file edits, verdicts, cost and budget."""
    from agent.transcripts.format import TranscriptError
    from agent.transcripts.reader import load_transcript
    from agent.transcripts.show import render, render_summary, summarize
    from agent.transcripts.view import build_view

    if html is not None:
        check_output_file("--html", html)
    try:
        loaded = load_transcript(transcript)
        view = build_view(loaded)
    except TranscriptError as exc:
        fail(str(exc))
    summary = summarize(loaded)
    if summary_only:
        render_summary(summary, console)
        return
    if html is None:
        render(view, console, full=full, summary=summary)
        return
    from agent.transcripts.show_html import render_html

    try:
        html.write_text(render_html(view), encoding="utf-8")
    except OSError as exc:
        fail(f"--html {html}: cannot write ({exc.strerror})")
    console.print(f"wrote {html}", highlight=False)


def export_command(
    transcripts: Annotated[list[Path], typer.Argument(help="Transcript files (transcript.jsonl).")],
    out: Annotated[Path, typer.Option("--out", help="The JSONL file to write.")],
    fmt: Annotated[str, typer.Option("--format", help="openai-chat or rl-steps.")] = "openai-chat",
    only_correct: Annotated[
        bool, typer.Option("--only-correct", help="Keep runs whose solution is correct.")
    ] = False,
    only_faster: Annotated[
        bool, typer.Option("--only-faster", help="Keep runs faster than eager beyond noise.")
    ] = False,
    min_speedup: Annotated[
        float | None, typer.Option("--min-speedup", help="Keep runs with at least this speedup.")
    ] = None,
) -> None:
    """Export transcripts as training data: OpenAI chat fine-tuning JSONL or per-step RL records with rewards."""
    from agent.transcripts.export import ExportFilter, export, keep
    from agent.transcripts.format import TranscriptError
    from agent.transcripts.reader import load_transcript

    if fmt not in ("openai-chat", "rl-steps"):
        fail(f"--format {fmt}: choose openai-chat or rl-steps")
    check_output_file("--out", out)
    try:
        loaded = [load_transcript(path) for path in transcripts]
    except TranscriptError as exc:
        fail(str(exc))
    if any(path.resolve() == out.resolve() for path in transcripts):
        fail(f"--out {out}: is one of the transcripts being exported; pick another file")
    rules = ExportFilter(only_correct=only_correct, only_faster=only_faster, min_speedup=min_speedup)
    try:
        kept, lines = export(loaded, fmt, rules, out)  # type: ignore[arg-type]
    except OSError as exc:
        fail(f"--out {out}: cannot write ({exc.strerror})")
    unfinished = sum(1 for t in loaded if (t.truncated or not t.ended) and keep(t, rules))
    cut = f" ({unfinished} cut off: the run did not finish)" if unfinished else ""
    console.print(f"kept {kept} of {len(loaded)} runs{cut}; wrote {lines} lines to {out}", highlight=False)


def check_output_file(flag: str, path: Path) -> None:
    """Refuse an output file that cannot be written, before any work: its folder must exist and it
    must not be a folder itself. Nothing is created."""
    if path.is_dir():
        fail(f"{flag} {path}: is a folder; give a file name")
    if not path.parent.is_dir():
        fail(f"{flag} {path}: the folder {path.parent} does not exist; create it first")
    check_output_folder(flag, path.parent, named=path)

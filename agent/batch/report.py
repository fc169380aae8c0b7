"""`agent report STORE`: the metrics of each batch in a store, as rich tables, markdown and HTML."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich import box
from rich.console import Console
from rich.table import Table

from agent.batch.metrics import (
    BASELINES,
    P_VALUES,
    Metrics,
    Sample,
    best_per_task,
    compute_metrics,
    metrics_by_level,
    p_label,
    samples_from_records,
)
from agent.batch.records import AttemptRecord, RunRecord
from agent.batch.stages import StageShare, stage_breakdown, stage_rows
from agent.batch.store import Store
from agent.run.region_records import RegionRun


class CandidateRow(BaseModel):
    task: str
    level: int | None
    candidate: str
    status: str
    verdict: str | None
    speedup_eager: float | None
    speedup_compile: float | None
    tokens: int
    usd: float
    gpu_s: float
    wall_s: float
    compile_s: float
    error: str | None
    solution_path: str | None
    transcript_path: str | None


OLDEST_SHOWN = 5  # in-flight attempts named in the header, longest-running first


class RunningAttempt(BaseModel):
    """An attempt claimed but not finished when the report was made: one running long is stuck, or
    waiting for something (GPU memory, a slot) that the stage times of finished ones do not show."""

    task: str
    level: int | None
    running_s: float
    """from its claim to the report"""


class BatchReport(BaseModel):
    store: str
    batch_key: str
    mode: str
    model: str | None
    solutions: str | None
    runs: list[dict[str, Any]]
    gpus: list[str]
    versions: dict[str, Any]
    load_errors: list[str]
    metrics: dict[str, Metrics]
    """by task (best candidate): "all", "level1", ..."""
    per_candidate: Metrics
    tasks: list[Sample]
    candidates: list[CandidateRow]
    stages: list[StageShare] = []
    """where the evaluations' time went (final evaluation of each counted attempt)"""
    in_flight: int
    oldest_running: list[RunningAttempt] = []
    """the longest-running of the attempts in flight, longest first"""
    generated_at: str
    regions: dict[str, RegionRun] = {}
    """region-by-region runs (agent/run/by_region.py) of the counted attempts, by task/candidate"""


class NothingToReport(ValueError):
    """The selection has no batch (an unknown --batch key, a store with no batch yet): nothing is
    printed or written, and the message says why."""


def build_reports(store_path: Path, batch_key: str | None = None) -> list[BatchReport]:
    """The reports of `batch_key` (default: every batch) in the store, opened read-only.

    Raises StoreError for a file that is not a kernel-agent store, NothingToReport for an empty
    selection."""
    with Store(store_path, readonly=True) as store:
        known = store.batch_keys()
        if batch_key is not None and batch_key not in known:
            listed = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
            raise NothingToReport(
                f"--batch {batch_key}: no such batch in {store_path}"
                + (f" (it holds {listed})" if known else " (it holds no batch yet)")
            )
        if not known:
            raise NothingToReport(f"{store_path}: no batch recorded in this store yet")
        keys = [batch_key] if batch_key else known
        runs = store.runs()
        return [_report(store, key, [r for r in runs if r.batch_key == key]) for key in keys]


def _report(store: Store, key: str, runs: list[RunRecord]) -> BatchReport:
    records = store.results(key)
    running = sorted((a for a in store.attempts(key) if a.status == "running"), key=lambda a: a.started_at)
    now = time.time()
    per_candidate = samples_from_records(records)
    tasks = best_per_task(per_candidate)
    by_id = {r.attempt_id: r for r in records}
    last = runs[-1] if runs else None
    config = last.config if last else {}
    gpus = [g.get("name") or f"gpu {g.get('id')}" for g in (last.gpus if last else [])]
    return BatchReport(
        store=str(store.path),
        batch_key=key,
        mode=config.get("mode", "?"),
        model=config.get("model"),
        solutions=config.get("solutions"),
        runs=[_run_summary(r) for r in runs],
        gpus=gpus,
        versions=last.versions if last else {},
        load_errors=last.load_errors if last else [],
        metrics=metrics_by_level(tasks),
        per_candidate=compute_metrics(per_candidate),
        tasks=tasks,
        candidates=[_row(r) for r in records],
        stages=stage_breakdown(e for r in records for e in store.evaluations(r.attempt_id)),
        in_flight=len(running),
        oldest_running=[
            RunningAttempt(task=a.task_name, level=a.level, running_s=max(0.0, now - a.started_at))
            for a in running[:OLDEST_SHOWN]
        ],
        generated_at=time.strftime("%Y-%m-%d %H:%M:%S"),
        regions={
            f"{by_id[i].task_name}/{by_id[i].candidate}": run
            for i, run in store.region_runs(list(by_id)).items()
        },
    )


def _run_summary(run: RunRecord) -> dict[str, Any]:
    def when(t: float | None) -> str | None:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else None

    return {
        "id": run.id,
        "status": run.status,
        "started": when(run.started_at),
        "finished": when(run.finished_at),
        "host": run.host,
    }


def _row(r: AttemptRecord) -> CandidateRow:
    return CandidateRow(
        task=r.task_name,
        level=r.level,
        candidate=r.candidate,
        status=r.status,
        verdict=r.verdict,
        speedup_eager=r.speedup_eager,
        speedup_compile=r.speedup_compile,
        tokens=r.tokens,
        usd=r.usd,
        gpu_s=r.gpu_s,
        wall_s=r.wall_s,
        compile_s=r.compile_s,
        error=_last_line(r.error)[:300] or None,
        solution_path=r.solution_path,
        transcript_path=r.transcript_path,
    )


def _last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


# -- text forms ---------------------------------------------------------------------------
def fmt_x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def fmt_pct(v: float) -> str:
    return f"{v:.0%}"


def summary_rows(report: BatchReport) -> tuple[list[str], list[list[str]]]:
    """The headline table: one row per level (and all), KernelBench's columns."""
    head = ["scope", "tasks", "compiled", "correct"]
    head += [f"{p_label(p)} {b}" for b in BASELINES for p in P_VALUES if p > 0]
    head += ["geomean eager", "geomean compile", "errors", "hack-flagged"]
    rows = []
    for scope, m in report.metrics.items():
        row = [scope, str(m.n), fmt_pct(m.compiled_rate), fmt_pct(m.correct_rate)]
        row += [fmt_pct(m.fast_p[b][p_label(p)]) for b in BASELINES for p in P_VALUES if p > 0]
        row += [fmt_x(m.geomean["eager"]), fmt_x(m.geomean["compile"]), str(m.errors), str(m.flagged)]
        rows.append(row)
    return head, rows


def cost_rows(report: BatchReport) -> tuple[list[str], list[list[str]]]:
    head = [
        "scope",
        "tokens",
        "usd",
        "gpu_s",
        "wall_s",
        "per task: tokens / usd / gpu_s",
        "per solved: tokens / usd / gpu_s",
    ]
    rows = []
    for scope, m in report.metrics.items():
        per_solved = (
            f"{m.per_solved.tokens:,} / ${m.per_solved.usd:.2f} / {m.per_solved.gpu_s:.0f}s"
            if m.per_solved
            else "-"
        )
        rows.append(
            [
                scope,
                f"{m.total.tokens:,}",
                f"${m.total.usd:.2f}",
                f"{m.total.gpu_s:.0f}",
                f"{m.total.wall_s:.0f}",
                f"{m.per_task.tokens:,} / ${m.per_task.usd:.2f} / {m.per_task.gpu_s:.0f}s",
                per_solved,
            ]
        )
    return head, rows


def candidate_rows(report: BatchReport) -> tuple[list[str], list[list[str]]]:
    head = [
        "level",
        "task",
        "candidate",
        "verdict",
        "vs eager",
        "vs compile",
        "usd",
        "gpu_s",
        "wall_s",
        "note",
    ]
    rows = [
        [
            str(c.level if c.level is not None else "-"),
            c.task,
            c.candidate,
            c.verdict or c.status,
            fmt_x(c.speedup_eager),
            fmt_x(c.speedup_compile),
            f"${c.usd:.2f}",
            f"{c.gpu_s:.1f}",
            f"{c.wall_s:.1f}",
            (c.error or "")[:120],
        ]
        for c in report.candidates
    ]
    return head, rows


def region_rows(report: BatchReport) -> tuple[list[str], list[list[str]]]:
    """One row a model solved region by region: the share of its time the regions cover and the
    submitted composition holds, its regions, and its end-to-end speedups."""
    head = ["model", "allocation", "covered", "kept", "regions kept/covered/all", "vs eager", "vs compile"]
    rows = []
    for name, run in sorted(report.regions.items()):
        covered = sum(r.covered for r in run.regions)
        rows.append(
            [
                name,
                run.allocation,
                fmt_pct(run.covered_share),
                fmt_pct(run.kept_share),
                f"{len(run.submitted or [])}/{covered}/{len(run.regions)}",
                fmt_x(run.speedup_eager),
                fmt_x(run.speedup_compile),
            ]
        )
    return head, rows


def header_lines(report: BatchReport) -> list[str]:
    what = f"model {report.model}" if report.mode == "agent" else f"solutions {report.solutions}"
    last = report.runs[-1] if report.runs else {}
    lines = [
        f"batch {report.batch_key}: {report.mode} ({what}); {len(report.runs)} run(s), last {last.get('status', '?')}"
        f" {last.get('started', '')}",
        f"GPUs: {', '.join(report.gpus) or 'none recorded'}; torch {report.versions.get('torch')}; "
        f"kernel-agent {report.versions.get('kernel-agent')} ({(report.versions.get('git_sha') or '?')[:10]})",
        f"per task: best candidate; {report.per_candidate.n} candidates judged, "
        f"{report.per_candidate.correct} correct",
    ]
    if report.in_flight:
        lines.append(
            f"{report.in_flight} attempt(s) still running or left by a killed batch (rerun to finish)"
        )
        oldest = ", ".join(
            f"{'L' + str(a.level) + ' ' if a.level is not None else ''}{a.task} {a.running_s / 60:.1f} min"
            for a in report.oldest_running
        )
        lines.append(f"in flight longest, since their claim: {oldest}")
    return lines


def narrow_summary_rows(report: BatchReport) -> tuple[list[str], list[list[str]]]:
    """The headline numbers in 80 columns: rates, fast_1 and the geomean speedups, per scope."""
    head = ["scope", "tasks", "compiled", "correct", "errors"]
    head += [f"fast_1\n{b}" for b in BASELINES] + [f"geomean\n{b}" for b in BASELINES]
    rows = []
    for scope, m in report.metrics.items():
        row = [scope, str(m.n), fmt_pct(m.compiled_rate), fmt_pct(m.correct_rate), str(m.errors)]
        row += [fmt_pct(m.fast_p[b][p_label(1.0)]) for b in BASELINES]
        row += [fmt_x(m.geomean[b]) for b in BASELINES]
        rows.append(row)
    return head, rows


def fast_p_rows(report: BatchReport) -> tuple[list[str], list[list[str]]]:
    """Every fast_p, one row per scope and baseline, and how many correct tasks are left out of
    fast_p (p > 0) for a hack flag (80 columns)."""
    head = ["scope", "vs", *[p_label(p) for p in P_VALUES], "hack-flagged"]
    rows = [
        [scope, b, *[fmt_pct(m.fast_p[b][p_label(p)]) for p in P_VALUES], str(m.flagged)]
        for scope, m in report.metrics.items()
        for b in BASELINES
    ]
    return head, rows


def narrow_cost_rows(report: BatchReport) -> tuple[list[str], list[list[str]]]:
    head = ["scope", "tokens", "usd", "gpu_s", "wall_s", "usd/task", "usd/solved"]
    rows = [
        [
            scope,
            f"{m.total.tokens:,}",
            f"${m.total.usd:.2f}",
            f"{m.total.gpu_s:.0f}",
            f"{m.total.wall_s:.0f}",
            f"${m.per_task.usd:.2f}",
            f"${m.per_solved.usd:.2f}" if m.per_solved else "-",
        ]
        for scope, m in report.metrics.items()
    ]
    return head, rows


def narrow_candidate_rows(report: BatchReport) -> tuple[list[str], list[list[str]]]:
    head = ["task", "candidate", "verdict", "eager", "compile", "usd", "note"]
    rows = [
        [
            (f"L{c.level} " if c.level is not None else "") + c.task,
            c.candidate,
            c.verdict or c.status,
            fmt_x(c.speedup_eager),
            fmt_x(c.speedup_compile),
            f"${c.usd:.2f}",
            c.error or "",
        ]
        for c in report.candidates
    ]
    return head, rows


FLEXIBLE_COLUMNS = {"task": 28, "candidate": 20, "note": 40}
"""The narrow tables' columns that are cut to fit (their widest), so the others never wrap."""


def print_report(
    report: BatchReport, console: Console, *, candidates: bool = True, wide: bool = False
) -> None:
    """The report as rich tables: within 80 columns (the columns that matter; every fast_p in a
    table of its own), or every column of the markdown report with `wide`."""
    for line in header_lines(report):
        console.print(line, highlight=False)
    if wide:
        tables = [
            ("KernelBench metrics (per task)", summary_rows(report)),
            ("Cost", cost_rows(report)),
            *((("Where the evaluation time went", stage_rows(report.stages)),) if report.stages else ()),
            *((("Candidates", candidate_rows(report)),) if candidates else ()),
            *((("Whole models, region by region", region_rows(report)),) if report.regions else ()),
        ]
    else:
        tables = [
            ("KernelBench metrics (per task)", narrow_summary_rows(report)),
            ("fast_p (per task: correct, no hack flag, over p x faster)", fast_p_rows(report)),
            ("Cost", narrow_cost_rows(report)),
            *((("Where the evaluation time went", stage_rows(report.stages)),) if report.stages else ()),
            *((("Candidates", narrow_candidate_rows(report)),) if candidates else ()),
            *((("Whole models, region by region", region_rows(report)),) if report.regions else ()),
        ]
    for title, (head, rows) in tables:
        if wide:
            table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
            for column in head:
                table.add_column(column, overflow="fold")
        else:
            table = Table(
                title=title,
                title_justify="left",
                box=box.SIMPLE_HEAD,
                show_edge=False,
                padding=(0, 1, 0, 0),
                pad_edge=False,
            )
            for column, width in zip(head, _fit(head, rows, console.width), strict=True):
                # Long names and messages are cut (with an ellipsis); numbers and verdicts never wrap.
                table.add_column(column, overflow="ellipsis", no_wrap=True, width=width)
        for row in rows:
            table.add_row(*row)
        console.print()
        console.print(table)


def _fit(head: list[str], rows: list[list[str]], width: int) -> list[int]:
    """Column widths for a narrow table `width` wide: every column its natural width, less what the
    FLEXIBLE_COLUMNS give up (never below 8) when the table would be wider."""
    natural = [
        max(len(line) for text in [column, *(row[i] for row in rows)] for line in text.split("\n"))
        for i, column in enumerate(head)
    ]
    widths = [
        min(n, FLEXIBLE_COLUMNS[c]) if c in FLEXIBLE_COLUMNS else n
        for c, n in zip(head, natural, strict=True)
    ]
    room = width - (2 * len(head) - 1)  # a space of padding and a separator between columns
    flexible = [i for i, c in enumerate(head) if c in FLEXIBLE_COLUMNS]
    excess = sum(widths) - room
    while excess > 0 and flexible:
        widest = max(flexible, key=lambda i: widths[i])
        if widths[widest] <= 8:
            break
        widths[widest] -= 1
        excess -= 1
    return widths


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(reports: list[BatchReport]) -> str:
    parts = ["# Batch report", ""]
    for report in reports:
        parts += [f"## Batch {report.batch_key}", ""]
        parts += [f"- {line}" for line in header_lines(report)]
        parts += ["", "### KernelBench metrics (per task)", "", _md_table(*summary_rows(report))]
        parts += ["", "### Cost", "", _md_table(*cost_rows(report))]
        if report.stages:
            parts += ["", "### Where the evaluation time went", "", _md_table(*stage_rows(report.stages))]
        parts += ["", "### Candidates", "", _md_table(*candidate_rows(report)), ""]
        if report.regions:
            parts += ["### Whole models, region by region", "", _md_table(*region_rows(report)), ""]
            for name, run in sorted(report.regions.items()):
                parts += [f"#### {name}", "", run.table(), ""]
                if run.compositions:
                    parts += [run.compositions_table(), ""]
        if report.load_errors:
            parts += ["### Tasks that did not load", "", *[f"- {e}" for e in report.load_errors], ""]
    return "\n".join(parts)

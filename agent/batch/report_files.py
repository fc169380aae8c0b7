"""A batch's report.md and report.html on disk: the markdown from report.py, the page from
report_html.py (which builds on report.py, so the two are written from here)."""

from __future__ import annotations

from pathlib import Path

from agent.batch.report import BatchReport, NothingToReport, build_reports, render_markdown
from agent.batch.report_html import render_html


def write_reports(reports: list[BatchReport] | Path, out_dir: Path) -> tuple[Path, Path]:
    """Write report.md and report.html into `out_dir` (created): the reports given, or those of
    every batch of the store at that path. Raises NothingToReport, never writing an empty report."""
    if isinstance(reports, Path):
        reports = build_reports(reports)
    if not reports:
        raise NothingToReport("no batch to report: report.md and report.html were not written")
    out_dir.mkdir(parents=True, exist_ok=True)
    md, html = out_dir / "report.md", out_dir / "report.html"
    md.write_text(render_markdown(reports), encoding="utf-8")
    html.write_text(render_html(reports), encoding="utf-8")
    return md, html

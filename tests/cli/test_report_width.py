"""`agent report` fits an 80-column terminal: every line of its tables, rendered by rich at width
80, is at most 80 characters (no screenshot); `--wide` keeps every column."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from agent.batch.report import build_reports, print_report
from tests.batch.test_report import fill_store

REPO = Path(__file__).resolve().parents[2]


def rendered(store: Path, *, width: int, wide: bool = False) -> str:
    (report,) = build_reports(store)
    # Long names and messages must be cut, not wrap the table.
    report.candidates[0].task = "19_ReLU_with_a_name_much_longer_than_any_column_should_be"
    report.candidates[-1].error = "RuntimeError: " + "a long error message " * 20
    text = io.StringIO()
    print_report(report, Console(width=width, file=text, color_system=None), candidates=True, wide=wide)
    return text.getvalue()


def test_the_report_fits_80_columns(tmp_path: Path) -> None:
    text = rendered(fill_store(tmp_path), width=80)
    too_long = [line for line in text.splitlines() if len(line) > 80]
    assert not too_long, "\n".join(too_long)
    for header in ("scope", "tasks", "compiled", "correct", "fast_1.05", "usd/solved", "verdict"):
        assert header in text
    assert "all     4      75%       50%      1" in text  # one row per scope, no wrapped cells
    assert "…" in text  # the long task name and the error were cut


def test_wide_keeps_every_column(tmp_path: Path) -> None:
    text = rendered(fill_store(tmp_path), width=240, wide=True)
    assert "fast_1.05 compile" in text and "per solved: tokens / usd / gpu_s" in text


@pytest.mark.slow
def test_agent_report_command_at_80_columns(tmp_path: Path) -> None:
    store = fill_store(tmp_path)
    env = {**os.environ, "COLUMNS": "80", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent.cli",
            "report",
            str(store),
            "--candidates",
            "--out",
            str(tmp_path / "r"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    long = [line for line in proc.stdout.splitlines() if len(line) > 80 and not line.startswith("wrote ")]
    assert not long, "\n".join(long)
    assert (tmp_path / "r" / "report.md").is_file()

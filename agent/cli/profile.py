"""`agent profile TASK.py`: the hot-region table of a model (agent/regions/hot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from agent.cli.common import console, fail, gpu_visible, json_flag, sandbox_option

PIPE_WIDTH = 140
"""The table's width in a file or a pipe (a terminal's own width otherwise): every column whole."""


def profile_command(
    task: Annotated[
        Path, typer.Argument(help="A task file (a .py defining Model, get_inputs, get_init_inputs).")
    ],
    as_json: Annotated[bool, json_flag()] = False,
    sandbox: Annotated[str, sandbox_option()] = "local",
    estimate: Annotated[
        bool, typer.Option("--estimate", help="Estimate shares from the floors even when a GPU is visible.")
    ] = False,
) -> None:
    """Where a model's time goes, region by region: each fusible region's share of the time,
    FLOPs, bytes, % of the speed-of-light floor and headroom (time above the floor), and whether
    the template library covers it. Times come from torch.profiler on the GPU; without one they
    are estimated from the floors at an H200's nominal rates."""
    from rich import box
    from rich.table import Table

    from agent.regions.hot import hot_regions
    from agent.tasks import TaskLoadError, parse_task
    from agent.templates.graph import TraceError

    try:
        parse_task(task)
    except TaskLoadError as exc:
        fail(str(exc))
    try:
        table = hot_regions(task, sandbox_kind=sandbox, gpu=not estimate and gpu_visible())
    except (TraceError, RuntimeError) as exc:
        fail(str(exc))
    if as_json:
        print(table.model_dump_json(indent=2))
        return
    out = Table(title=table.title, box=box.SIMPLE_HEAD, pad_edge=False)
    for name, justify in (
        ("region", "left"),
        ("share", "right"),
        ("time\nus", "right"),
        ("GFLOP", "right"),
        ("MB", "right"),
        ("% of\nfloor", "right"),
        ("headroom\nus", "right"),
        ("covered", "left"),
    ):
        # the numbers stay whole (their headers wrap); a long region label folds onto more lines
        if name == "region":
            out.add_column(name, min_width=16, overflow="fold")
        else:
            out.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for row in table.regions:
        out.add_row(
            row.label,
            f"{100 * row.share:.1f}%",
            f"{row.time_s * 1e6:.1f}",
            f"{row.flops / 1e9:.1f}",
            f"{row.bytes / 1e6:.1f}",
            f"{row.pct_of_floor:.0f}%",
            f"{row.headroom_s * 1e6:.1f}",
            "yes" if row.covered else "no",
        )
    shown = console if console.is_terminal else Console(width=max(console.width, PIPE_WIDTH))
    shown.print(out)
    shown.print(f"covered by the template library: {100 * table.covered_share:.1f}% of the model's time")

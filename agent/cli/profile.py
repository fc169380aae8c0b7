"""`agent profile TASK.py`: the hot-region table of a model (agent/regions/hot.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agent.cli.common import console, fail, gpu_visible, json_flag, sandbox_option


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
    out = Table(title=table.title)
    for name, justify in (
        ("region", "left"),
        ("share", "right"),
        ("time us", "right"),
        ("GFLOP", "right"),
        ("MB", "right"),
        ("% floor", "right"),
        ("headroom us", "right"),
        ("covered", "left"),
    ):
        out.add_column(name, justify=justify, no_wrap=name == "region")  # type: ignore[arg-type]
    for row in table.regions:
        out.add_row(
            row.label,
            f"{100 * row.share:.1f}%",
            f"{row.time_s * 1e6:.1f}",
            f"{row.flops / 1e9:.3f}",
            f"{row.bytes / 1e6:.2f}",
            f"{row.pct_of_floor:.0f}%",
            f"{row.headroom_s * 1e6:.1f}",
            "yes" if row.covered else "no (torch)",
        )
    console.print(out)
    console.print(f"covered by the template library: {100 * table.covered_share:.1f}% of the model's time")

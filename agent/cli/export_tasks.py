"""`agent export-tasks DIR --format harbor --out OUT`: KernelBench-style tasks as Harbor tasks
(agent/rl/harbor.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agent.cli.common import PolicyOpt, check_output_folder, console, fail


def export_tasks_command(
    folder: Annotated[
        Path, typer.Argument(help="A task file or a folder of them (e.g. KernelBench/level1).")
    ],
    out: Annotated[Path, typer.Option("--out", help="Folder to write one task folder per task into.")],
    fmt: Annotated[str, typer.Option("--format", help="Task format: harbor.")] = "harbor",
    policy: PolicyOpt = "strict",
    gpu_type: Annotated[
        list[str] | None, typer.Option("--gpu-type", help="Harbor gpu_types entry (repeatable), e.g. H100.")
    ] = None,
) -> None:
    """Write each task as an RL task of another framework (Harbor: task.toml, instruction.md,
    environment/Dockerfile, tests/test.sh running the referee)."""
    from agent.rl.harbor import default_repo, export_tasks
    from agent.tasks import TaskLoadError, discover_task_files, parse_task

    if fmt != "harbor":
        fail(f"--format {fmt}: unknown; the formats are: harbor")
    check_output_folder("--out", out)
    try:
        tasks = [parse_task(p) for p in discover_task_files(folder)]
    except TaskLoadError as exc:
        fail(str(exc))
    if not tasks:
        fail(f"{folder}: no task files (*.py) in this folder")
    written = export_tasks(tasks, out, repo=default_repo(), policy=policy, gpu_types=gpu_type)
    console.print(f"wrote {len(written)} Harbor task(s) to {out}")

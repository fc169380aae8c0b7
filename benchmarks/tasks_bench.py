"""How long `agent tasks` takes to report every task's input shapes, and what it built them on.

usage: python benchmarks/tasks_bench.py FOLDER [FOLDER ...] [--out FILE.md]

Runs the real command (`python -m agent.cli tasks FOLDER --json`) once per folder in a fresh
process, as a user would, and writes a markdown table: wall time, peak memory of the command's
process tree, tasks reported, how many were built on the meta device (nothing allocated) and
which fell back to the CPU, and the errors.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Row:
    folder: Path
    wall_s: float
    tasks: int
    meta: int
    cpu: list[str]
    errors: list[str]


def run(folder: Path) -> Row:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "agent.cli", "tasks", str(folder), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    wall = time.monotonic() - start
    report = json.loads(proc.stdout)
    tasks = report["tasks"]
    built = [t["spec"]["built_on"] for t in tasks if t.get("spec")]
    return Row(
        folder=folder,
        wall_s=wall,
        tasks=len(tasks),
        meta=sum(b == "meta" for b in built),
        cpu=[t["name"] for t in tasks if t.get("spec") and t["spec"]["built_on"] != "meta"],
        errors=[f"{Path(e['path']).name}: {e['problem']}" for e in report["errors"]],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = [run(folder) for folder in args.folders]
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    lines = [
        f"# `agent tasks`: input shapes without building the inputs ({datetime.date.today()})",
        "",
        f"- command: `python benchmarks/tasks_bench.py {' '.join(map(str, args.folders))}`",
        f"- machine: {platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}, no GPU",
        f"- largest process of the command's tree: {peak_mib:.0f} MiB resident",
        f"- load average before the run: {load_before:.2f} (other work on the machine slows it)",
        f"- total: {sum(row.wall_s for row in rows):.1f} s wall for {sum(row.tasks for row in rows)} tasks",
        "",
        "| folder | wall s | tasks | built on meta | on the CPU (needed values) | errors |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        cpu = ", ".join(row.cpu) or "-"
        lines.append(
            f"| {row.folder} | {row.wall_s:.1f} | {row.tasks} | {row.meta} | {cpu} | {len(row.errors)} |"
        )
    errors = [e for row in rows for e in row.errors]
    if errors:
        lines += ["", "Errors (the task files' own imports):", ""] + [f"- {e}" for e in errors]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()

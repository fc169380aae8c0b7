"""The regions of every task of a KernelBench level, and which the template library covers.

usage: python benchmarks/regions_table.py [--level-dir ../shared/kernelbench/level3]
           [--out benchmarks/results/regions/level3_regions.md] [--graphs GRAPHS.json]

Each task is traced on meta tensors in the local sandbox (`--graphs` reads graphs already traced:
a JSON object of file name -> OpGraph), partitioned (agent/regions/partition.py), and each region
judged by the template recognizer as its own task. Times are the estimates from the floors at an
H200's nominal rates (no GPU needed); "covered share" is the covered regions' share of that time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.regions.partition import Region, partition
from agent.regions.whole import RegionCoverage, coverage
from agent.templates.graph import OpGraph, TraceError, trace_tasks


def task_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.py"), key=lambda p: int(p.name.split("_")[0]))


def analyse(graph: OpGraph) -> tuple[list[Region], list[RegionCoverage]]:
    regions = partition(graph)
    return regions, coverage(graph, regions)


def table(rows: list[tuple[str, OpGraph | TraceError]], command: str) -> str:
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    lines = [
        "# KernelBench level 3: regions and template coverage",
        "",
        f"Command: `{command}` ({platform.node() or 'CPU machine'}, {date}, no GPU: times are estimates from the",
        "floors at an H200's nominal rates, agent/regions/cost.py). A region is covered when the template",
        "recognizer accepts it as its own task; the rest stays in torch.",
        "",
        "| task | nodes | regions | covered | covered share of time | regions (kind, covered) | not covered because |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    total = covered_models = 0
    for name, graph in rows:
        if isinstance(graph, TraceError):
            lines.append(f"| {name} | - | - | - | - | trace failed: {str(graph)[:120]} | |")
            continue
        regions, cov = analyse(graph)
        time_all = sum(r.eager_s for r in regions) or 1e-30
        share = sum(r.eager_s for r, c in zip(regions, cov, strict=True) if c.covered) / time_all
        kinds: dict[str, list[int]] = {}
        for region, c in zip(regions, cov, strict=True):
            counts = kinds.setdefault(region.kind, [0, 0])
            counts[0] += 1
            counts[1] += int(c.covered)
        summary = ", ".join(f"{k} {v[1]}/{v[0]}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1][0]))
        reasons = sorted({c.reason.removeprefix("operators not covered: ") for c in cov if not c.covered})
        n_cov = sum(c.covered for c in cov)
        total += 1
        covered_models += int(n_cov > 0)
        lines.append(
            f"| {name} | {len(graph.nodes)} | {len(regions)} | {n_cov} | {100 * share:.1f}% | {summary} | "
            f"{'; '.join(r[:60] for r in reasons[:3])} |"
        )
    lines += ["", f"{total} tasks partitioned; {covered_models} have at least one covered region."]
    if any(isinstance(g, TraceError) and "the trace worker failed" in str(g) for _, g in rows):
        lines += [
            "A trace that failed with no message passed the sandbox's 4 MiB output cap: an LSTM or GRU",
            "unrolled over its sequence is tens of thousands of operators.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level-dir", type=Path, default=Path("../shared/kernelbench/level3"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/regions/level3_regions.md"))
    parser.add_argument("--graphs", type=Path, default=None)
    args = parser.parse_args()
    files = task_files(args.level_dir)
    if args.graphs:
        stored = json.loads(args.graphs.read_text(encoding="utf-8"))
        graphs: list[OpGraph | TraceError] = [
            OpGraph.model_validate(stored[p.name])
            if isinstance(stored.get(p.name), dict)
            else TraceError(str(stored.get(p.name, "not traced")))
            for p in files
        ]
    else:
        graphs = trace_tasks(files)
    command = "python benchmarks/regions_table.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        table([(p.name, g) for p, g in zip(files, graphs, strict=True)], command.strip()), encoding="utf-8"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

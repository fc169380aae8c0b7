"""Tables of `agent batch --model templates` over whole models, region by region (issue 44).

Reads the stores of two batches over the same tasks and budget, one per allocation
(`--region-allocation gain` and `uniform`), and writes markdown: per allocation, one row a model
(share of eager time the covered regions hold and the submitted composition keeps, end-to-end
speedups vs eager and torch.compile, whether it beats torch.compile beyond noise) and each region's
budget and what it returned; then the geomean vs torch.compile, the share faster than torch.compile
beyond noise, and gain against uniform side by side.

    python benchmarks/regions_batch_table.py --store gain=RUN/gain/store.sqlite \
        --store uniform=RUN/uniform/store.sqlite --out OUT/regions_batch.md --title "..."
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, installed or not

from agent.batch.store import Store
from agent.run.region_records import RegionRun


class ModelRow(BaseModel):
    task: str
    status: str
    verdict: str | None
    speedup_eager: float | None
    speedup_compile: float | None
    faster_than_compile: bool
    regions: RegionRun | None
    note: str = ""


def rows(store_path: Path) -> list[ModelRow]:
    found = []
    with Store(store_path, readonly=True) as store:
        records = store.results()
        regions = store.region_runs([r.attempt_id for r in records])
        for record in records:
            final = store.evaluations(record.attempt_id)
            perf = final[-1].performance if final else None
            outcome = perf.speedup_vs_compile.outcome if perf and perf.speedup_vs_compile else None
            found.append(
                ModelRow(
                    task=record.task_name,
                    status=record.status,
                    verdict=record.verdict,
                    speedup_eager=record.speedup_eager if record.correct else None,
                    speedup_compile=record.speedup_compile if record.correct else None,
                    faster_than_compile=record.correct and outcome == "faster",
                    regions=regions.get(record.attempt_id),
                    note=(record.error or "").splitlines()[-1][:120] if record.error else "",
                )
            )
    return sorted(found, key=lambda r: int(r.task.split("_")[0]) if r.task[0].isdigit() else 0)


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _budgets(run: RegionRun | None) -> str:
    if run is None:
        return "one plan for the whole task"
    shown = [
        f"{r.label.split(':')[0]} {r.units}->{_x(r.speedup_eager)} {r.status}"
        for r in sorted(run.regions, key=lambda r: -r.share)
        if r.covered
    ]
    return "; ".join(shown)


def allocation_table(name: str, found: list[ModelRow]) -> str:
    lines = [
        f"### {name} allocation",
        "",
        "| model | verdict | covered share | kept share | vs eager | vs torch.compile | faster than compile | "
        "regions: budget -> own speedup vs eager, status |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for row in found:
        run = row.regions
        covered = f"{100 * run.covered_share:.0f}%" if run else "100%"
        kept = f"{100 * run.kept_share:.0f}%" if run else "-"
        verdict = row.verdict or (f"{row.status}: {row.note}" if row.note else row.status)
        lines.append(
            f"| {row.task} | {verdict} | {covered} | {kept} | {_x(row.speedup_eager)} | "
            f"{_x(row.speedup_compile)} | {'yes' if row.faster_than_compile else 'no'} | {_budgets(run)} |"
        )
    return "\n".join(lines) + "\n\n" + summary(found) + "\n"


def summary(found: list[ModelRow]) -> str:
    correct = [r.speedup_compile for r in found if r.speedup_compile]
    faster = sum(r.faster_than_compile for r in found)
    mean = geomean([v for v in correct if v])
    return (
        f"{len(correct)} of {len(found)} models correct end to end; geomean vs torch.compile over them "
        f"{_x(mean)}; faster than torch.compile beyond noise: {faster} of {len(found)} "
        f"({100 * faster / max(len(found), 1):.0f}%)."
    )


def side_by_side(by_name: dict[str, list[ModelRow]]) -> str:
    names = list(by_name)
    tasks = sorted({r.task for found in by_name.values() for r in found}, key=lambda t: int(t.split("_")[0]))
    index = {name: {r.task: r for r in found} for name, found in by_name.items()}
    head = "| model | " + " | ".join(f"{n} vs compile | {n} budgets" for n in names) + " |"
    lines = ["### Side by side", "", head, "|---|" + "---:|---|" * len(names)]
    for task in tasks:
        cells = []
        for name in names:
            row = index[name].get(task)
            run = row.regions if row else None
            budgets = ", ".join(f"r{r.region:02d}:{r.units}" for r in run.regions if r.units) if run else "-"
            cells += [_x(row.speedup_compile) if row else "-", budgets]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    means = []
    for name in names:
        values = [r.speedup_compile for r in by_name[name] if r.speedup_compile]
        means += [_x(geomean(values)), ""]
    lines.append("| geomean | " + " | ".join(means) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", action="append", required=True, help="NAME=STORE.sqlite, repeatable")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--title", default="Whole models, region by region (`--model templates`)")
    args = parser.parse_args()
    by_name = {}
    for spec in args.store:
        name, _, path = spec.partition("=")
        by_name[name] = rows(Path(path))
    parts = [f"# {args.title}", ""]
    for name, found in by_name.items():
        parts.append(allocation_table(name, found))
    if len(by_name) > 1:
        parts.append(side_by_side(by_name))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(parts), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

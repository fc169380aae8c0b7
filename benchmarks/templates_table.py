"""Issue 19's tables from an `agent batch --model templates` store: per level (fast_p against eager
and torch.compile, geomean, wall time and evaluations per task) and per template family (tasks,
correct, fast_1 against torch.compile beyond the referee's noise band, best and median speedup, and
where the candidate sits against the memory-bandwidth floor of the task).

    python benchmarks/templates_table.py runs/batch/store.sqlite [RERUN/store.sqlite ...] --kernelbench ../shared/kernelbench \
        --out benchmarks/results/templates_h200.md

Each task's family is the template library's own (agent.templates: traced on meta tensors here, no
GPU), so the tables can be made on any machine from a store that came back from the GPU. A task
counts once, with its final evaluation (the submitted candidate, judged again). A correct verdict
carrying one of the RL reward's hack flags (agent/rl/reward.py, e.g. `own_kernels_never_ran` for a
GEMM or convolution that is cuBLAS or cuDNN alone) is shown as correct but never as faster.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.batch.metrics import Sample, fast_p, geomean_speedup  # noqa: E402
from agent.batch.records import AttemptRecord  # noqa: E402
from agent.batch.store import Store, StoreError  # noqa: E402
from agent.rl.reward import HACK_FLAGS  # noqa: E402
from agent.templates import NotCovered, recognize  # noqa: E402
from agent.templates.graph import TraceError, trace_tasks  # noqa: E402

P_VALUES = (0.0, 1.0, 1.05, 1.5, 2.0)


@dataclass
class TaskRow:
    level: int
    name: str
    family: str | None  # None: not covered by the library
    finished: bool
    correct: bool = False
    flags: tuple[str, ...] = ()
    eager: float | None = None
    compile: float | None = None
    faster_eager: bool = False  # the referee's noise-aware call, and no hack flag
    faster_compile: bool = False
    floor_share: float | None = None  # memory floor / candidate time: 1.0 is at the floor
    wall_s: float = 0.0
    evaluations: int = 0
    run: int = 1  # which of the stores given (1: the first) the row comes from

    @property
    def clean(self) -> bool:
        return self.correct and not (set(self.flags) & HACK_FLAGS)

    def sample(self) -> Sample:
        """The task as the batch's KernelBench metrics count it: a hack-flagged verdict is not correct."""
        return Sample(
            task_key=f"level{self.level}/{self.name}",
            name=self.name,
            level=self.level,
            compiled=self.correct,
            correct=self.clean,
            speedup_eager=self.eager,
            speedup_compile=self.compile,
        )


def counted_attempts(store: Store) -> list[AttemptRecord]:
    """Per task the attempt that counts (Store.results: the latest done, else the latest error) and,
    for a task without one, its latest attempt: still running when the store was copied. A resumed
    batch's store also holds the attempts its killed run left, which the redone ones replace."""
    counted = {(r.batch_key, r.item_key): r for r in store.results()}
    unfinished = {(r.batch_key, r.item_key): r for r in store.attempts()}  # oldest first: the latest stays
    rest = [r for key, r in unfinished.items() if key not in counted]
    return sorted([*counted.values(), *rest], key=lambda r: r.attempt_id)


def merge_runs(runs: list[list[TaskRow]]) -> list[TaskRow]:
    """One row per task: a later run's finished row replaces an earlier run's (a rerun of some
    tasks, e.g. with a larger budget or after a template changed); an unfinished one does not."""
    merged: dict[tuple[int, str], TaskRow] = {}
    for index, rows in enumerate(runs, start=1):
        for row in rows:
            row.run = index
            key = (row.level, row.name)
            if key not in merged or row.finished or not merged[key].finished:
                merged[key] = row
    return list(merged.values())


def load_rows(store_path: Path, kernelbench: Path) -> list[TaskRow]:
    with Store(store_path, readonly=True) as store:
        attempts = counted_attempts(store)
        evaluations = {
            a.attempt_id: (
                store.evaluations(a.attempt_id),
                store.evaluations(a.attempt_id, "intermediate"),
            )
            for a in attempts
        }
    paths = [kernelbench / f"level{a.level}" / f"{a.task_name}.py" for a in attempts]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(
            f"--kernelbench {kernelbench}: no task file {missing[0]} (and {len(missing) - 1} more)"
        )
    families = {}
    for path, graph in zip(paths, trace_tasks(paths), strict=True):
        plan = (
            NotCovered(task=path.stem, reason=str(graph))
            if isinstance(graph, TraceError)
            else recognize(graph)
        )
        families[path] = None if isinstance(plan, NotCovered) else plan.family
    rows = []
    for attempt, path in zip(attempts, paths, strict=True):
        finals, intermediate = evaluations[attempt.attempt_id]
        row = TaskRow(
            level=attempt.level or 0,
            name=attempt.task_name,
            family=families[path],
            finished=attempt.status == "done",
            wall_s=attempt.wall_s or 0.0,
            evaluations=len(intermediate),
        )
        if finals:
            fill(row, finals[-1].model_dump(mode="json"))
        rows.append(row)
    return rows


def fill(row: TaskRow, result: dict) -> None:
    """From an EvalResult as JSON (the store's, dumped)."""
    row.correct = result["verdict"] == "correct"
    perf = result.get("performance") or {}
    row.flags = tuple(f["code"] for f in perf.get("flags") or [])
    for baseline in ("eager", "compile"):
        speedup = perf.get(f"speedup_vs_{baseline}")
        if speedup:
            setattr(row, baseline, speedup["value"])
            setattr(row, f"faster_{baseline}", row.clean and speedup["outcome"] == "faster")
    candidate_ms = (perf.get("candidate") or {}).get("median_ms")
    if perf.get("memory_floor_ms") and candidate_ms:
        row.floor_share = perf["memory_floor_ms"] / candidate_ms


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:.0f}%" if d else "-"


def fmt(x: float | None, suffix: str = "x") -> str:
    return f"{x:.2f}{suffix}" if x is not None else "-"


def level_table(rows: list[TaskRow], levels: list[int], total_per_level: dict[int, int]) -> list[str]:
    lines = [
        "| level | tasks in the level | finished | covered | correct | correct, no hack flag | "
        + " | ".join(f"fast_{p:g} eager" for p in P_VALUES)
        + " | "
        + " | ".join(f"fast_{p:g} compile" for p in P_VALUES)
        + " | fast_1 compile beyond noise | geomean eager | geomean compile | wall s per task (median) | evaluations per task (median) |",
        "|" + "---|" * (19),
    ]
    for level in levels:
        done = [r for r in rows if r.level == level and r.finished]
        covered = [r for r in done if r.family]
        samples = [r.sample() for r in done]
        n = len(done)
        lines.append(
            f"| {level} | {total_per_level.get(level, 0)} | {n} | {len(covered)} | "
            f"{sum(r.correct for r in done)} | {sum(r.clean for r in done)} | "
            + " | ".join(f"{100 * fast_p(samples, p, 'eager'):.0f}%" for p in P_VALUES)
            + " | "
            + " | ".join(f"{100 * fast_p(samples, p, 'compile'):.0f}%" for p in P_VALUES)
            + f" | {pct(sum(r.faster_compile for r in done), n)}"
            f" | {fmt(geomean_speedup(samples, 'eager'))}"
            f" | {fmt(geomean_speedup(samples, 'compile'))}"
            f" | {statistics.median([r.wall_s for r in covered]) if covered else 0:.0f}"
            f" | {statistics.median([r.evaluations for r in covered]) if covered else 0:.0f} |"
        )
    return lines


def family_table(rows: list[TaskRow]) -> list[str]:
    lines = [
        "| family | level | finished tasks | correct | correct, no hack flag | hack-flagged (which) "
        "| fast_1 vs compile (beyond noise) | best vs compile | median vs compile | median vs eager "
        "| at the bandwidth floor (median, best) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r.family, r.level) for r in rows if r.family and r.finished})
    for family, level in keys:
        rs = [r for r in rows if r.family == family and r.level == level and r.finished]
        clean = [r for r in rs if r.clean]
        flagged = sorted({f for r in rs if r.correct for f in r.flags if f in HACK_FLAGS})
        compile_values = [r.compile for r in clean if r.compile is not None]
        eager_values = [r.eager for r in clean if r.eager is not None]
        floors = [r.floor_share for r in clean if r.floor_share is not None]
        lines.append(
            f"| {family} | {level} | {len(rs)} | {sum(r.correct for r in rs)} | {len(clean)} "
            f"| {sum(r.correct and not r.clean for r in rs)}{' (' + ', '.join(flagged) + ')' if flagged else ''} "
            f"| {sum(r.faster_compile for r in rs)} ({pct(sum(r.faster_compile for r in rs), len(rs))}) "
            f"| {fmt(max(compile_values) if compile_values else None)} "
            f"| {fmt(statistics.median(compile_values) if compile_values else None)} "
            f"| {fmt(statistics.median(eager_values) if eager_values else None)} "
            f"| {fmt(100 * statistics.median(floors) if floors else None, '%')}, "
            f"{fmt(100 * max(floors) if floors else None, '%')} |"
        )
    return lines


def task_table(rows: list[TaskRow]) -> list[str]:
    lines = [
        "| task | family | verdict | flags | vs eager | vs compile | faster than compile | of the floor | evaluations | wall s | run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.level, int(r.name.split("_")[0]))):
        if not r.family:
            continue
        verdict = ("correct" if r.correct else "not correct") if r.finished else "not finished"
        lines.append(
            f"| L{r.level} {r.name} | {r.family} | {verdict} | {', '.join(r.flags) or '-'} | {fmt(r.eager)} "
            f"| {fmt(r.compile)} | {'yes' if r.faster_compile else 'no'} "
            f"| {fmt(100 * r.floor_share if r.floor_share else None, '%')} | {r.evaluations} | {r.wall_s:.0f} | {r.run} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "stores",
        type=Path,
        nargs="+",
        metavar="store",
        help="the batch's store.sqlite; more stores (later runs of some tasks) replace its rows for the tasks they finished",
    )
    parser.add_argument(
        "--kernelbench", type=Path, required=True, help="the task folders (levelN/) the batch ran"
    )
    parser.add_argument("--title", default="The template policy over KernelBench")
    parser.add_argument(
        "--note", action="append", default=[], help="a line for the header (command, machine, ...)"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    for store in args.stores:
        if not store.is_file():
            raise SystemExit(f"{store}: no such store (the batch's OUT/store.sqlite)")

    try:
        rows = merge_runs([load_rows(store, args.kernelbench) for store in args.stores])
    except StoreError as exc:
        raise SystemExit(str(exc)) from None
    levels = sorted({r.level for r in rows})
    totals = {level: len(list((args.kernelbench / f"level{level}").glob("*.py"))) for level in levels}
    unfinished = [r for r in rows if not r.finished]
    lines = [
        f"# {args.title}",
        "",
        f"- made: {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} by "
        f"`python benchmarks/templates_table.py {' '.join(s.name for s in args.stores)} --kernelbench {args.kernelbench}`",
        *(
            f"- run {i}: `{store.name}`, {sum(r.run == i for r in rows)} of the rows below"
            for i, store in enumerate(args.stores, start=1)
            if len(args.stores) > 1
        ),
        *(f"- {note}" for note in args.note),
        f"- tasks in the store: {len(rows)}; finished {len(rows) - len(unfinished)}; still running when the "
        f"store was copied: {len(unfinished)} ({', '.join(f'L{r.level} {r.name}' for r in unfinished) or 'none'})",
        "- fast_p: share of the level's finished tasks that are correct, carry no hack flag, and whose speedup "
        "is above p (KernelBench's definition); *beyond noise*: the referee's noise band lies wholly above 1",
        "- bandwidth floor: the bytes the task must move (inputs read, outputs written) at the measured "
        "bandwidth, over the candidate's median time (100% = at the floor)",
        "",
        "## Per level",
        "",
        *level_table(rows, levels, totals),
        "",
        "## Per template family",
        "",
        *family_table(rows),
        "",
        "## Per task (covered tasks)",
        "",
        *task_table(rows),
        "",
    ]
    text = "\n".join(lines)
    args.out.write_text(text)
    print(text[: text.index("## Per task")])  # the per-task table is in the file
    return 0


if __name__ == "__main__":
    sys.exit(main())
